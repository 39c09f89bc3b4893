//! Secrets kept in files (`--registration-token-file`,
//! `--sandbox-token-file`), so they stay out of the environment and of
//! `ps`. What an empty one means is the caller's: the runner refuses it,
//! the hub closes registration.

use std::path::Path;

/// The token in `path`: its first line, trimmed (an editor's trailing
/// newline or a CR is not part of it). Never logged.
/// Read as every user's file is ([`crate::user_file`]): a regular file of
/// at most [`crate::user_file::TOKEN_MAX`] bytes.
pub fn read(path: &Path) -> std::io::Result<String> {
    let text = crate::user_file::read_user_text(path, crate::user_file::TOKEN_MAX, "token file")?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

//! What the hub gets of a program's (or a compiler's, a checker's) words:
//! the first [`Judge::output_cap`](super::Judge::output_cap) bytes, lossily
//! decoded as UTF-8, never longer than the cap.

use std::fs::File;
use std::io::{Read, Seek};

/// The first `cap` bytes of a stream, as UTF-8 (lossy), at most `cap` bytes long.
pub(super) fn read_capped(r: &mut impl Read, cap: usize) -> String {
    let mut buf = Vec::with_capacity(cap.min(1 << 20));
    let _ = r.take(cap as u64).read_to_end(&mut buf);
    cap_string(String::from_utf8_lossy(&buf).into_owned(), cap)
}

/// [`read_capped`] of a file the judge wrote through, from its start: a
/// run's output or log, read back through the judge's own handle.
pub(super) fn read_back(f: &mut File, cap: usize) -> String {
    f.rewind().map(|_| read_capped(f, cap)).unwrap_or_default()
}

/// Cuts `s` to at most `cap` bytes, on a character boundary (a replacement
/// character is 3 bytes, so lossy decoding can grow a string).
pub(super) fn cap_string(mut s: String, cap: usize) -> String {
    if s.len() > cap {
        let mut end = cap;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// How the case's message starts in its `stderr`.
const MESSAGE_MARK: &str = "[validator] ";

/// The most of the case's `stderr` a message takes: a quarter of the cap,
/// so the program's own words are never all pushed out.
pub(super) fn message_cap(output_cap: usize) -> usize {
    output_cap / 4
}

/// A program's `own` stderr with a validator's `message` after it, the
/// stderr cut first so that the message fits the cap.
pub(super) fn message_after(own: String, message: Option<String>, output_cap: usize) -> String {
    let Some(message) = message.filter(|m| !m.trim().is_empty()) else { return own };
    let note = cap_string(format!("{MESSAGE_MARK}{}\n", message.trim_end()), message_cap(output_cap));
    let mut stderr = cap_string(own, output_cap.saturating_sub(note.len() + 1));
    if !stderr.is_empty() && !stderr.ends_with('\n') {
        stderr.push('\n');
    }
    stderr.push_str(&note);
    cap_string(stderr, output_cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_output_never_exceeds_the_cap() {
        assert_eq!(read_capped(&mut "hello".as_bytes(), 3), "hel");
        assert_eq!(read_capped(&mut "hello".as_bytes(), 64), "hello");
        // "é" is 2 bytes: a cut inside it must not leave 3 bytes of U+FFFD past the cap.
        let s = read_capped(&mut "aé".as_bytes(), 2);
        assert!(s.len() <= 2, "{s:?}");
        // Invalid bytes become U+FFFD (3 bytes each): still capped.
        let s = read_capped(&mut [0xffu8; 10].as_slice(), 10);
        assert!(s.len() <= 10 && s.starts_with('\u{fffd}'), "{s:?}");
    }
}

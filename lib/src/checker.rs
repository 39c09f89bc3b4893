//! Output checkers: does a program's output match the expected answer?
//!
//! [`Checker::Diff`] is Normal-OJ's only checker (`SubmissionExecutor.strip`
//! in its Sandbox): split both outputs into lines, strip trailing white space
//! from each line, drop trailing empty lines, compare the lists. Leading and
//! interior white space are significant. Two stricter/looser variants are
//! offered for problems that want them: [`Checker::Exact`] (byte equality) and
//! [`Checker::Token`] (equal white-space separated tokens).
//!
//! All three stream both files through fixed buffers, so checking a 64 MiB
//! output costs the judge no memory (which matters: the judge's own resident
//! size leaks into the memory figure of the next program it forks, see
//! `sandbox.rs`).
//!
//! Differences from Python's `str.splitlines` + `rstrip` (Normal-OJ decodes the
//! output as UTF-8, dropping invalid bytes): lines end at `\n`, `\r\n` or a lone
//! `\r`, and the white space stripped is ASCII (space, `\t`, `\r`, `\v`, `\f`).
//! Python also breaks lines at `\v`, `\f`, `\x1c`–`\x1e`, `\x85`, U+2028/2029
//! and strips Unicode spaces; outputs where that matters are vanishingly rare.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek};
use std::path::Path;

/// Which comparison decides AC or WA.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Checker {
    /// Normal-OJ's default: line lists equal after stripping trailing white
    /// space per line and trailing empty lines.
    #[default]
    Diff,
    /// The bytes are identical.
    Exact,
    /// The white-space separated tokens are identical.
    Token,
}

impl Checker {
    /// The checker a job's `checker` field names. Normal-OJ sends a
    /// placeholder program text there, and its runner ignores it: anything but
    /// `exact` or `token` means the default, `diff`.
    pub fn from_job(name: Option<&str>) -> Checker {
        match name.map(str::trim) {
            Some("exact") => Checker::Exact,
            Some("token") => Checker::Token,
            _ => Checker::Diff,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Checker::Diff => "diff",
            Checker::Exact => "exact",
            Checker::Token => "token",
        }
    }

    /// Compares the program's output with the expected answer: `Ok(true)` is AC.
    pub fn check_files(self, output: &Path, answer: &Path) -> io::Result<bool> {
        let open = |p: &Path| File::open(p).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())));
        self.check(
            BufReader::with_capacity(64 * 1024, open(output)?),
            BufReader::with_capacity(64 * 1024, open(answer)?),
        )
    }

    /// Compares the program's output, read from the start through an open
    /// handle, with the expected answer: `Ok(true)` is AC.
    pub fn check_output(self, output: &mut File, answer: &Path) -> io::Result<bool> {
        output.rewind()?;
        let ans = File::open(answer).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", answer.display())))?;
        self.check(BufReader::with_capacity(64 * 1024, output), BufReader::with_capacity(64 * 1024, ans))
    }

    /// Compares two streams: `Ok(true)` is AC.
    pub fn check(self, output: impl BufRead, answer: impl BufRead) -> io::Result<bool> {
        match self {
            Checker::Diff => diff(output, answer),
            Checker::Exact => exact(output, answer),
            Checker::Token => token(output, answer),
        }
    }
}

/// White space as the checkers strip or split it.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c)
}

/// Reads the next line into `line` (without its terminator: `\n`, `\r\n` or a
/// lone `\r`); `false` at the end of the stream.
fn next_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<bool> {
    line.clear();
    let mut any = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(any);
        }
        any = true;
        match buf.iter().position(|&b| b == b'\n' || b == b'\r') {
            None => {
                line.extend_from_slice(buf);
                let n = buf.len();
                r.consume(n);
            }
            Some(i) => {
                let cr = buf[i] == b'\r';
                line.extend_from_slice(&buf[..i]);
                r.consume(i + 1);
                if cr {
                    // A `\r\n` pair is one terminator.
                    let next = r.fill_buf()?;
                    if next.first() == Some(&b'\n') {
                        r.consume(1);
                    }
                }
                return Ok(true);
            }
        }
    }
}

fn trim_end(line: &[u8]) -> &[u8] {
    let end = line.iter().rposition(|&b| !is_space(b)).map_or(0, |i| i + 1);
    &line[..end]
}

/// Normal-OJ's comparison, streamed: pairs of lines must match after trimming;
/// once one side ends, the rest of the other must be blank lines.
fn diff(mut out: impl BufRead, mut ans: impl BufRead) -> io::Result<bool> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    loop {
        let more_a = next_line(&mut out, &mut a)?;
        let more_b = next_line(&mut ans, &mut b)?;
        match (more_a, more_b) {
            (false, false) => return Ok(true),
            (true, true) if trim_end(&a) == trim_end(&b) => {}
            (true, false) if trim_end(&a).is_empty() => {}
            (false, true) if trim_end(&b).is_empty() => {}
            _ => return Ok(false),
        }
    }
}

fn exact(mut out: impl Read, mut ans: impl Read) -> io::Result<bool> {
    let (mut a, mut b) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = read_full(&mut out, &mut a)?;
        let m = read_full(&mut ans, &mut b)?;
        if a[..n] != b[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Fills `buf` as far as the stream allows (short only at its end).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads the next white-space separated token into `tok`; `false` when none is left.
fn next_token(r: &mut impl BufRead, tok: &mut Vec<u8>) -> io::Result<bool> {
    tok.clear();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(!tok.is_empty());
        }
        let (start, n) = if tok.is_empty() {
            // Skip the white space before the token.
            match buf.iter().position(|&b| !is_space(b)) {
                Some(i) => (i, buf.len()),
                None => {
                    let n = buf.len();
                    r.consume(n);
                    continue;
                }
            }
        } else {
            (0, buf.len())
        };
        match buf[start..].iter().position(|&b| is_space(b)) {
            Some(i) => {
                tok.extend_from_slice(&buf[start..start + i]);
                r.consume(start + i);
                return Ok(true);
            }
            None => {
                tok.extend_from_slice(&buf[start..]);
                r.consume(n);
            }
        }
    }
}

fn token(mut out: impl BufRead, mut ans: impl BufRead) -> io::Result<bool> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    loop {
        let more_a = next_token(&mut out, &mut a)?;
        let more_b = next_token(&mut ans, &mut b)?;
        if more_a != more_b || a != b {
            return Ok(false);
        }
        if !more_a {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(c: Checker, out: &str, ans: &str) -> bool {
        c.check(out.as_bytes(), ans.as_bytes()).unwrap()
    }

    /// Normal-OJ's `strip` written out as Python does it, to compare against.
    fn python_strip(s: &str) -> Vec<String> {
        // str.splitlines() for \n, \r\n and \r, then rstrip() and drop trailing "".
        let mut lines = Vec::new();
        let mut cur = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\n' => lines.push(std::mem::take(&mut cur)),
                '\r' => {
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    lines.push(std::mem::take(&mut cur));
                }
                c => cur.push(c),
            }
        }
        if !cur.is_empty() {
            lines.push(cur);
        }
        let mut lines: Vec<String> =
            lines.into_iter().map(|l| l.trim_end_matches([' ', '\t', '\r', '\x0b', '\x0c']).to_string()).collect();
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        lines
    }

    #[test]
    fn diff_ignores_trailing_space_and_trailing_blank_lines() {
        assert!(run(Checker::Diff, "3\n", "3\n"));
        assert!(run(Checker::Diff, "3", "3\n"));
        assert!(run(Checker::Diff, "3   \t\n\n\n", "3\n"));
        assert!(run(Checker::Diff, "1 2\r\n3\r\n", "1 2\n3\n"));
        assert!(run(Checker::Diff, "", "\n\n"));
        assert!(run(Checker::Diff, "\n  \n", ""));
        assert!(run(Checker::Diff, "a\rb\n", "a\nb\n"));
    }

    #[test]
    fn diff_keeps_leading_and_interior_space_and_inner_blank_lines() {
        assert!(!run(Checker::Diff, " 3\n", "3\n"));
        assert!(!run(Checker::Diff, "1  2\n", "1 2\n"));
        assert!(!run(Checker::Diff, "1\n\n2\n", "1\n2\n"));
        assert!(!run(Checker::Diff, "1\n2\n", "1\n"));
        assert!(!run(Checker::Diff, "1\n", "1\n2\n"));
        assert!(!run(Checker::Diff, "", "0\n"));
        assert!(!run(Checker::Diff, "3\n\n\nx", "3\n"));
    }

    #[test]
    fn diff_agrees_with_normal_ojs_strip() {
        let samples = [
            "",
            "\n",
            "a",
            "a\n",
            "a \n b \n",
            "a\r\nb",
            "a\rb",
            "a\r",
            "\r\n\r\n",
            "x\n\n\ny\n\n",
            " \t\n",
            "1 2 3",
            "1 2 3 \n",
            "a\n\r\nb",
            "a\r\n\nb",
            "a\r\rb",
        ];
        for x in samples {
            for y in samples {
                assert_eq!(run(Checker::Diff, x, y), python_strip(x) == python_strip(y), "{x:?} vs {y:?}");
            }
        }
    }

    #[test]
    fn diff_streams_across_buffer_boundaries() {
        // A tiny buffer forces lines and `\r\n` pairs to straddle refills.
        let out = "line 1  \r\nline 2\r\n\r\n".repeat(50);
        let ans = "line 1\nline 2\n\n".repeat(50);
        let small = |s: &str| BufReader::with_capacity(3, std::io::Cursor::new(s.as_bytes().to_vec()));
        assert!(Checker::Diff.check(small(&out), small(&ans)).unwrap());
        assert!(!Checker::Diff.check(small(&out), small(&ans.replace("line 2", "line 3"))).unwrap());
    }

    #[test]
    fn exact_compares_bytes() {
        assert!(run(Checker::Exact, "3\n", "3\n"));
        assert!(!run(Checker::Exact, "3", "3\n"));
        assert!(!run(Checker::Exact, "3 \n", "3\n"));
        let big = "x".repeat(200_000);
        assert!(run(Checker::Exact, &big, &big));
        assert!(!run(Checker::Exact, &big, &big[1..]));
    }

    #[test]
    fn token_compares_words() {
        assert!(run(Checker::Token, "1  2\n\n3", "1 2 3\n"));
        assert!(run(Checker::Token, "", " \n"));
        assert!(!run(Checker::Token, "1 2", "1 2 3"));
        assert!(!run(Checker::Token, "12", "1 2"));
        let small = |s: &str| BufReader::with_capacity(2, std::io::Cursor::new(s.as_bytes().to_vec()));
        assert!(Checker::Token.check(small("abc   defg\n"), small("abc defg")).unwrap());
    }

    #[test]
    fn a_jobs_checker_field_names_the_checker() {
        assert_eq!(Checker::from_job(None), Checker::Diff);
        assert_eq!(Checker::from_job(Some("diff")), Checker::Diff);
        assert_eq!(Checker::from_job(Some("print(\"not implement yet. qaq\")")), Checker::Diff);
        assert_eq!(Checker::from_job(Some("token")), Checker::Token);
        assert_eq!(Checker::from_job(Some("exact")), Checker::Exact);
    }

    #[test]
    fn files_are_checked_and_a_missing_file_is_an_error() {
        let dir = std::env::temp_dir().join(format!("ojchk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("out"), "42 \n").unwrap();
        std::fs::write(dir.join("ans"), "42\n").unwrap();
        assert!(Checker::Diff.check_files(&dir.join("out"), &dir.join("ans")).unwrap());
        let e = Checker::Diff.check_files(&dir.join("nope"), &dir.join("ans")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

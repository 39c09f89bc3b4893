//! Output checkers: does a program's output match the expected answer?
//!
//! [`Checker::Diff`] is Normal-OJ's only checker (`SubmissionExecutor.strip`
//! in its Sandbox): split both outputs into lines, strip trailing white space
//! from each line, drop trailing empty lines, compare the lists. Leading and
//! interior white space are significant. Stricter/looser variants are
//! offered for problems that want them: [`Checker::Exact`] (byte equality),
//! [`Checker::Token`] (equal white-space separated tokens) and
//! [`Checker::Float`] (tokens, numbers equal within a tolerance).
//!
//! These four compare the two streams in step through fixed buffers, however
//! long a line or token is: a 64 MiB line costs the judge the same few hundred
//! KiB of buffers as a short one (which matters: the judge's own resident size
//! leaks into the memory figure of the next program it forks, see
//! `sandbox/`). `diff` holds no line: where two lines first differ, the rest
//! of both must be white space up to the line end. `float` reads a token of up
//! to 4096 bytes whole, to parse it as a number; a longer one is a word to it
//! (no number is written that long), compared byte by byte as it comes.
//!
//! # Streaming
//!
//! The same four also compare as the output comes ([`Checker::stream`]):
//! the judge feeds a [`Stream`] each chunk of the program's stdout as it
//! copies it (`sandbox/streams.rs`), the answer read alongside through a
//! 64 KiB buffer, and at the first byte after which no output can be
//! accepted the run is stopped: WA, without waiting for the program's end
//! (`verdict::decide`). The stream only ever says "cannot match"; a run
//! that ends on its own is checked whole as above, so a stream never
//! decides AC. It never says no to an output the whole comparison would
//! accept: `diff` diverges only where a line's rest cannot be trailing
//! white space (the answer's rest of the line is read at once; the
//! output's must be blank up to its line end), `token` where a token
//! cannot be the answer's, and `float` judges a token only once it is
//! complete (a separator follows it), by the same rule as the whole
//! comparison. What it cannot judge before the end (a missing line, a
//! token at the very end) is left to the whole comparison.
//!
//! Two more are programs shipped in the testdata, compiled once and run
//! sandboxed by the judge (`judge/`): [`Checker::Special`] (a testlib-style
//! `checker input output answer`) and [`Checker::Interactive`] (an
//! `interactor input output answer` talking to the program through two
//! pipes), and their ICPC kin [`Checker::Icpc`] and
//! [`Checker::IcpcInteractive`] (the problem package format's `validator
//! input answer feedback_dir [flags]`, exit 42 AC, 43 WA; a package is
//! mapped to the protocol by `ojrunner_protocol::icpc`, and run by
//! `judge/icpc.rs`). [`Judge::prepare_checker`](crate::judge::Judge::prepare_checker)
//! compiles them and returns the checker holding the binary; the name alone
//! ([`parse`]) is no checker, and [`Checker::Unprepared`] judges every case
//! JE rather than falling back to another comparison.
//!
//! # Names (a job's `checker` field, `judge-exec run --checker`)
//!
//! | name | checker |
//! |---|---|
//! | absent, `diff`, anything unknown (Normal-OJ's placeholder text) | [`Checker::Diff`] |
//! | `exact` | [`Checker::Exact`] |
//! | `token` | [`Checker::Token`] |
//! | `float`, `float:EPS`, `float:abs=A,rel=R` | [`Checker::Float`]: `EPS` is both tolerances; default 1e-6 |
//! | `special` | [`Checker::Special`]: `checker.cpp` or `checker.c` in the testdata |
//! | `interactive` | [`Checker::Interactive`]: `interactor.cpp` or `interactor.c` in the testdata |
//! | `icpc` | [`Checker::Icpc`]: an ICPC output validator, `icpc/validator.cpp` or `.c` in the testdata, its arguments in `icpc/validator_flags` |
//! | `icpc-interactive` | [`Checker::IcpcInteractive`]: the same validator as an ICPC interactor |
//!
//! Differences from Python's `str.splitlines` + `rstrip` (Normal-OJ decodes the
//! output as UTF-8, dropping invalid bytes): lines end at `\n`, `\r\n` or a lone
//! `\r`, and the white space stripped is ASCII (space, `\t`, `\r`, `\v`, `\f`).
//! Python also breaks lines at `\v`, `\f`, `\x1c`–`\x1e`, `\x85`, U+2028/2029
//! and strips Unicode spaces; outputs where that matters are vanishingly rare.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The default tolerance of [`Checker::Float`], absolute and relative.
pub const FLOAT_EPS: f64 = 1e-6;

/// Which comparison decides AC or WA. A job's cases share one, by reference.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Checker {
    /// Normal-OJ's default: line lists equal after stripping trailing white
    /// space per line and trailing empty lines.
    #[default]
    Diff,
    /// The bytes are identical.
    Exact,
    /// The white-space separated tokens are identical.
    Token,
    /// The white-space separated tokens are pairwise equal: two tokens that
    /// both read as finite numbers (of at most 4096 bytes) when
    /// `|out - ans| <= abs` or `|out - ans| <= rel * |ans|`; non-finite
    /// values (`inf`, `infinity`, `nan`, any case, signed) by value, never
    /// equal to a finite one; any others when identical.
    Float { abs: f64, rel: f64 },
    /// A testlib-style checker program, run sandboxed after the program as
    /// `checker input output answer`: exit 0 AC, 1 (WA) or 2 (PE) WA,
    /// anything else JE.
    Special(Program),
    /// A testlib-style interactor, run sandboxed alongside the program as
    /// `interactor input output answer`, its stdin the program's stdout and
    /// its stdout the program's stdin: exit 0 AC, 1 or 2 WA, anything else JE.
    Interactive(Program),
    /// An ICPC output validator, run sandboxed after the program as
    /// `validator input answer feedback_dir/ [flags]`, the program's output
    /// its stdin: exit 42 AC, 43 WA, anything else JE; its
    /// `judgemessage.txt` is the case's message.
    Icpc(Validator),
    /// An ICPC output validator as an interactor, run alongside the program
    /// with the same arguments, its stdin the program's stdout and its stdout
    /// the program's stdin: exit 42 AC, 43 WA, anything else JE.
    IcpcInteractive(Validator),
    /// `special`, `interactive` or `icpc…` named but not compiled (see
    /// [`Judge::prepare_checker`](crate::judge::Judge::prepare_checker)), or
    /// a malformed name: every case is JE.
    Unprepared,
}

// The tolerances are never NaN (`parse` refuses them).
impl Eq for Checker {}

/// A compiled checker or interactor: its binary, root-owned and runnable by
/// the slots, in a directory of its own (the run sees only that directory).
/// Shared (`Arc`): the threads of a job's cases hold the same one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub binary: Arc<Path>,
}

impl Program {
    pub fn new(binary: PathBuf) -> Program {
        Program { binary: binary.into() }
    }

    /// The directory the run binds (read-only).
    pub fn dir(&self) -> &Path {
        self.binary.parent().unwrap_or(Path::new("/"))
    }
}

/// An ICPC validator: its compiled program and the arguments after its
/// three (the package's `validator_flags`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validator {
    pub program: Program,
    pub flags: Vec<String>,
}

/// What a checker name asks for, before anything is compiled.
#[derive(Clone, Debug, PartialEq)]
pub enum Named {
    /// A checker that needs nothing but the files.
    Builtin(Checker),
    /// `special`: compile `checker.cpp` / `checker.c` of the testdata.
    Special,
    /// `interactive`: compile `interactor.cpp` / `interactor.c` of the testdata.
    Interactive,
    /// `icpc`: compile `icpc/validator.cpp` / `.c` of the testdata.
    Icpc,
    /// `icpc-interactive`: the same, run as an interactor.
    IcpcInteractive,
}

/// Reads a checker name (see the module doc). Unknown names are Normal-OJ's
/// placeholder: `diff`. `Err` for a malformed `float:…`.
pub fn parse(name: Option<&str>) -> Result<Named, BadName> {
    let name = name.map(str::trim).unwrap_or("diff");
    Ok(match name {
        "exact" => Named::Builtin(Checker::Exact),
        "token" => Named::Builtin(Checker::Token),
        "special" => Named::Special,
        "interactive" => Named::Interactive,
        "icpc" => Named::Icpc,
        "icpc-interactive" => Named::IcpcInteractive,
        "float" => Named::Builtin(Checker::Float { abs: FLOAT_EPS, rel: FLOAT_EPS }),
        _ => match name.strip_prefix("float:") {
            Some(spec) => Named::Builtin(parse_float(spec)?),
            None => Named::Builtin(Checker::Diff),
        },
    })
}

/// A checker name that names no checker: a malformed `float:…`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadName {
    #[error("checker float: bad tolerance {0:?} (want e.g. float:1e-4 or float:abs=1e-6,rel=1e-9)")]
    Tolerance(String),
    #[error("checker float: bad item {0:?} (want abs=X or rel=Y)")]
    Item(String),
}

fn parse_float(spec: &str) -> Result<Checker, BadName> {
    let number = |s: &str| match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(BadName::Tolerance(s.to_string())),
    };
    if !spec.contains('=') {
        let eps = number(spec)?;
        return Ok(Checker::Float { abs: eps, rel: eps });
    }
    // Only the tolerances named count: the other is 0.
    let (mut abs, mut rel) = (0.0, 0.0);
    for item in spec.split(',') {
        match item.split_once('=').map(|(k, v)| (k.trim(), v)) {
            Some(("abs", v)) => abs = number(v)?,
            Some(("rel", v)) => rel = number(v)?,
            _ => return Err(BadName::Item(item.to_string())),
        }
    }
    Ok(Checker::Float { abs, rel })
}

impl Checker {
    pub fn as_str(&self) -> &'static str {
        match self {
            Checker::Diff => "diff",
            Checker::Exact => "exact",
            Checker::Token => "token",
            Checker::Float { .. } => "float",
            Checker::Special(_) => "special",
            Checker::Interactive(_) => "interactive",
            Checker::Icpc(_) => "icpc",
            Checker::IcpcInteractive(_) => "icpc-interactive",
            Checker::Unprepared => "unprepared",
        }
    }

    /// Compares the program's output, read from the start through an open
    /// handle, with the expected answer: `Ok(true)` is AC.
    pub fn check_output(&self, output: &mut File, answer: &Path) -> io::Result<bool> {
        output.rewind()?;
        self.check(BufReader::with_capacity(64 * 1024, output), open_answer(answer)?)
    }

    /// The streaming comparison of this checker's output with `answer`
    /// (see the module doc), for the built-in four; `None` for the checker
    /// programs, which see only a whole output.
    pub fn stream(&self, answer: &Path) -> io::Result<Option<Stream>> {
        match Rule::of(self) {
            Some(rule) => Ok(Some(Stream::new(rule, open_answer(answer)?))),
            None => Ok(None),
        }
    }

    /// Compares two streams: `Ok(true)` is AC. The program checkers cannot
    /// compare streams (the judge runs them): an error.
    pub fn check(&self, output: impl BufRead, answer: impl BufRead) -> io::Result<bool> {
        match self {
            Checker::Diff => diff(output, answer),
            Checker::Exact => exact(output, answer),
            Checker::Token => token(output, answer),
            Checker::Float { abs, rel } => float(output, answer, *abs, *rel),
            Checker::Special(_) | Checker::Interactive(_) | Checker::Icpc(_) | Checker::IcpcInteractive(_) => {
                Err(io::Error::other(format!("the {} checker is run by the judge", self.as_str())))
            }
            Checker::Unprepared => Err(io::Error::other(
                "the checker was not prepared (special/interactive need Judge::prepare_checker), or its name is malformed",
            )),
        }
    }
}

/// White space as the checkers strip or split it.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c)
}

/// A byte that ends a line: `\n`, or `\r` alone or as the first of `\r\n`.
fn is_line_end(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// Consumes the line terminator `r` is at (`\n`, `\r\n` or a lone `\r`), if any.
fn skip_line_end(r: &mut impl BufRead) -> io::Result<()> {
    match r.fill_buf()?.first() {
        Some(b'\n') => r.consume(1),
        Some(b'\r') => {
            r.consume(1);
            // The `\n` of a `\r\n` pair may come with the next read.
            if r.fill_buf()?.first() == Some(&b'\n') {
                r.consume(1);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Consumes the rest of the line and its terminator: is it all white space?
/// Stops at the first byte that is not.
fn rest_of_line_is_blank(r: &mut impl BufRead) -> io::Result<bool> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(true);
        }
        match buf.iter().position(|&b| is_line_end(b) || !is_space(b)) {
            Some(i) => {
                let blank = is_line_end(buf[i]);
                r.consume(i);
                if blank {
                    skip_line_end(r)?;
                }
                return Ok(blank);
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// Consumes the rest of the stream: is it all white space (blank lines)?
/// Stops at the first byte that is not.
fn rest_is_blank(r: &mut impl BufRead) -> io::Result<bool> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(true);
        }
        if !buf.iter().all(|&b| is_space(b)) {
            return Ok(false);
        }
        let n = buf.len();
        r.consume(n);
    }
}

/// Consumes a line of each stream, terminators included: are they equal once
/// their trailing white space is stripped? Walks both in step; from the first
/// byte where they differ (or end), both rests must be trailing white space.
/// Stops early when they are not equal.
fn lines_match(a: &mut impl BufRead, b: &mut impl BufRead) -> io::Result<bool> {
    consume_common(a, b, is_line_end)?;
    Ok(rest_of_line_is_blank(a)? && rest_of_line_is_blank(b)?)
}

/// Consumes what the two streams have in common, in step through their
/// buffers: up to the first byte where they differ or that `stops` (left in
/// both), or the end of either.
fn consume_common(a: &mut impl BufRead, b: &mut impl BufRead, stops: impl Fn(u8) -> bool) -> io::Result<()> {
    loop {
        let (x, y) = (a.fill_buf()?, b.fill_buf()?);
        let n = x.len().min(y.len());
        let same = x[..n].iter().zip(&y[..n]).position(|(&p, &q)| p != q || stops(p)).unwrap_or(n);
        if same == 0 {
            return Ok(());
        }
        a.consume(same);
        b.consume(same);
    }
}

/// Normal-OJ's comparison, in step through both streams' buffers: pairs of
/// lines must match after stripping; once one side ends, the rest of the other
/// must be blank lines.
fn diff(mut out: impl BufRead, mut ans: impl BufRead) -> io::Result<bool> {
    loop {
        let more_out = !out.fill_buf()?.is_empty();
        let more_ans = !ans.fill_buf()?.is_empty();
        match (more_out, more_ans) {
            (true, true) if lines_match(&mut out, &mut ans)? => {}
            (true, true) => return Ok(false),
            (true, false) => return rest_is_blank(&mut out),
            (false, true) => return rest_is_blank(&mut ans),
            (false, false) => return Ok(true),
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

/// Consumes the white space before the next token: `false` when no token is left.
fn skip_space(r: &mut impl BufRead) -> io::Result<bool> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        match buf.iter().position(|&b| !is_space(b)) {
            Some(i) => {
                r.consume(i);
                return Ok(true);
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// Skips the white space before each stream's next token: `None` when both
/// have one, else whether they are equal so far (both ended, not just one).
fn at_next_tokens(a: &mut impl BufRead, b: &mut impl BufRead) -> io::Result<Option<bool>> {
    let (more_a, more_b) = (skip_space(a)?, skip_space(b)?);
    Ok(if more_a && more_b { None } else { Some(more_a == more_b) })
}

/// Consumes the token each stream is at, in step: are they identical? Stops
/// early when not.
fn tokens_match(a: &mut impl BufRead, b: &mut impl BufRead) -> io::Result<bool> {
    consume_common(a, b, is_space)?;
    let ended = |next: Option<&u8>| next.is_none_or(|&c| is_space(c));
    Ok(ended(a.fill_buf()?.first()) && ended(b.fill_buf()?.first()))
}

fn token(mut out: impl BufRead, mut ans: impl BufRead) -> io::Result<bool> {
    loop {
        if let Some(equal) = at_next_tokens(&mut out, &mut ans)? {
            return Ok(equal);
        }
        if !tokens_match(&mut out, &mut ans)? {
            return Ok(false);
        }
    }
}

/// The longest token [`Checker::Float`] reads as a number (the module doc and
/// judge-exec(8) name the figure); a longer one is a word, compared byte by
/// byte as it comes.
const NUMBER_MAX: usize = 4096;

/// Consumes the token `r` is at into `buf`, as far as it fits: its length in
/// `buf`, and whether the token ended there (`false`: the rest is unread).
fn read_token(r: &mut impl BufRead, buf: &mut [u8]) -> io::Result<(usize, bool)> {
    let mut len = 0;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            return Ok((len, true));
        }
        let token_end = chunk.iter().position(|&b| is_space(b));
        let take = token_end.unwrap_or(chunk.len()).min(buf.len() - len);
        buf[len..len + take].copy_from_slice(&chunk[..take]);
        r.consume(take);
        len += take;
        match token_end {
            Some(end) if end == take => return Ok((len, true)),
            // `buf` is full and the token goes on.
            _ if take == 0 => return Ok((len, false)),
            _ => {}
        }
    }
}

/// A token that reads as a number: a finite decimal (not a word that
/// Rust's parser would take, nor one past `f64`'s range), or a non-finite
/// value as C's `strtod` spells it ([`non_finite`]).
fn number(tok: &[u8]) -> Option<f64> {
    non_finite(tok).or_else(|| finite(tok))
}

fn finite(tok: &[u8]) -> Option<f64> {
    let first = *tok.first()?;
    if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.')) {
        return None;
    }
    if !tok.iter().all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')) {
        return None;
    }
    std::str::from_utf8(tok).ok()?.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// `inf`, `infinity`, `nan` or `nan(` letters, digits, `_` `)`, in any case
/// and optionally signed, as C's `strtod` reads them (and DOMjudge's
/// compare): what `printf` writes (`inf`, `-nan`), Python (`nan`), Java
/// (`NaN`, `Infinity`).
fn non_finite(tok: &[u8]) -> Option<f64> {
    let (negative, word) = match tok.first()? {
        b'-' => (true, &tok[1..]),
        b'+' => (false, &tok[1..]),
        _ => (false, tok),
    };
    let is = |w: &[u8], s: &str| w.eq_ignore_ascii_case(s.as_bytes());
    let value = if is(word, "inf") || is(word, "infinity") {
        f64::INFINITY
    } else if word.len() >= 3 && is(&word[..3], "nan") && nan_payload(&word[3..]) {
        f64::NAN
    } else {
        return None;
    };
    Some(if negative { -value } else { value })
}

/// What may follow `nan`: nothing, or `(` letters, digits and `_` `)`.
fn nan_payload(rest: &[u8]) -> bool {
    match rest {
        [] => true,
        [b'(', inner @ .., b')'] => inner.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_'),
        _ => false,
    }
}

/// Two tokens that both read as numbers, within the tolerances of each
/// other; a non-finite one only equals itself by value (NaN any NaN, an
/// infinity the same-signed one): no tolerance reaches it from a finite one.
fn numbers_close(a: &[u8], b: &[u8], abs: f64, rel: f64) -> bool {
    let (Some(x), Some(y)) = (number(a), number(b)) else {
        return false;
    };
    if !(x.is_finite() && y.is_finite()) {
        return (x.is_nan() && y.is_nan()) || x == y;
    }
    let d = (x - y).abs();
    // A little slack for the decimal representation of the bound itself.
    let slack = 1e-12 * d.max(f64::MIN_POSITIVE);
    d <= abs + slack || d <= rel * y.abs() + slack
}

fn float(mut out: impl BufRead, mut ans: impl BufRead, abs: f64, rel: f64) -> io::Result<bool> {
    let (mut a, mut b) = ([0u8; NUMBER_MAX], [0u8; NUMBER_MAX]);
    loop {
        if let Some(equal) = at_next_tokens(&mut out, &mut ans)? {
            return Ok(equal);
        }
        let (n, out_ended) = read_token(&mut out, &mut a)?;
        let (m, ans_ended) = read_token(&mut ans, &mut b)?;
        let (x, y) = (&a[..n], &b[..m]);
        let equal = match (out_ended, ans_ended) {
            (true, true) => x == y || numbers_close(x, y, abs, rel),
            // Two words too long to be numbers: the rest must be identical too.
            (false, false) => x == y && tokens_match(&mut out, &mut ans)?,
            // A word too long to be a number, and a shorter token.
            _ => false,
        };
        if !equal {
            return Ok(false);
        }
    }
}

/// A built-in checker's comparison as the output comes (see the module
/// doc): [`Stream::feed`] it the output's chunks in order; the answer is
/// read from `R` as far as the output goes, and no further.
pub struct Stream<R = BufReader<File>> {
    rule: Rule,
    ans: R,
    /// The output's last byte was a `\r` that ended a line: a `\n` next is
    /// part of it (`diff`).
    after_cr: bool,
    /// Bytes and `\n`s fed so far.
    fed: u64,
    newlines: u64,
    /// Where no output could be accepted any more, once it is known.
    diverged: Option<Divergence>,
    /// Reading the answer failed: the stream says nothing more (the whole
    /// comparison, after the run, meets the same error).
    broken: bool,
}

/// Where a streamed output diverged from its answer: its first byte after
/// which no output can be accepted (0-based), and that byte's line
/// (1-based, lines counted by `\n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Divergence {
    pub byte: u64,
    pub line: u64,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte {} (line {})", self.byte, self.line)
    }
}

/// Which comparison a [`Stream`] makes, and where it is.
enum Rule {
    Diff(DiffAt),
    Exact,
    /// Whether the output is inside a token (the answer is then inside the
    /// same one, as far as the output went).
    Token {
        in_token: bool,
    },
    /// `buf` holds the output's token so far (up to `NUMBER_MAX` + 1
    /// bytes), `abuf` the answer's at its start, read when the output's is
    /// judged (`answer_token`).
    Float {
        abs: f64,
        rel: f64,
        at: FloatAt,
        buf: Vec<u8>,
        abuf: Vec<u8>,
    },
}

impl Rule {
    /// The rule of a built-in checker, at the start; `None` for the
    /// checker programs, which see only a whole output.
    fn of(checker: &Checker) -> Option<Rule> {
        Some(match checker {
            Checker::Diff => Rule::Diff(DiffAt::InStep),
            Checker::Exact => Rule::Exact,
            Checker::Token => Rule::Token { in_token: false },
            Checker::Float { abs, rel } => {
                Rule::Float { abs: *abs, rel: *rel, at: FloatAt::Between, buf: Vec::new(), abuf: Vec::new() }
            }
            _ => return None,
        })
    }
}

/// The answer file, read through 64 KiB; an error names it.
fn open_answer(answer: &Path) -> io::Result<BufReader<File>> {
    let ans = File::open(answer).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", answer.display())))?;
    Ok(BufReader::with_capacity(64 * 1024, ans))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DiffAt {
    /// Both at the same place of the same line.
    InStep,
    /// The line diverged where the output has white space; the answer's
    /// rest of the line was blank (and is read past its end): the
    /// output's rest must be blank up to its line end.
    OutputRestBlank,
    /// The answer has ended, every line of it matched: the output's rest
    /// must be white space.
    AnswerEnded,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FloatAt {
    Between,
    /// In a token of at most `NUMBER_MAX` bytes so far, in `buf`.
    InToken,
    /// In a token longer than `NUMBER_MAX` bytes, a word the answer's
    /// (as long) must spell byte by byte: the rest is compared as it comes.
    Long,
}

impl<R: BufRead> Stream<R> {
    fn new(rule: Rule, ans: R) -> Stream<R> {
        Stream { rule, ans, after_cr: false, fed: 0, newlines: 0, diverged: None, broken: false }
    }

    /// The stream of `checker` (a built-in one) against `ans`.
    pub fn of(checker: &Checker, ans: R) -> Option<Stream<R>> {
        Rule::of(checker).map(|rule| Stream::new(rule, ans))
    }

    /// The output's next bytes: `false` once no output that begins with
    /// everything fed so far can be accepted (then [`Stream::diverged`]
    /// says where); `true` while one still could, or once the answer could
    /// not be read.
    pub fn feed(&mut self, chunk: &[u8]) -> bool {
        if self.diverged.is_some() {
            return false;
        }
        if self.broken {
            return true;
        }
        match self.step(chunk) {
            Ok(None) => {
                self.fed += chunk.len() as u64;
                self.newlines += count_newlines(chunk);
                true
            }
            Ok(Some(i)) => {
                let line = self.newlines + count_newlines(&chunk[..i]) + 1;
                self.diverged = Some(Divergence { byte: self.fed + i as u64, line });
                false
            }
            Err(_) => {
                self.broken = true;
                true
            }
        }
    }

    /// Where the output diverged, once a [`Stream::feed`] said so.
    pub fn diverged(&self) -> Option<Divergence> {
        self.diverged
    }

    /// Takes `chunk`: `Some(i)` when its byte `i` is the first after which
    /// nothing can match.
    fn step(&mut self, chunk: &[u8]) -> io::Result<Option<usize>> {
        match &mut self.rule {
            Rule::Exact => exact_step(&mut self.ans, chunk),
            Rule::Diff(at) => diff_step(&mut self.ans, at, &mut self.after_cr, chunk),
            Rule::Token { in_token } => token_step(&mut self.ans, in_token, chunk),
            Rule::Float { abs, rel, at, buf, abuf } => float_step(&mut self.ans, (*abs, *rel), at, buf, abuf, chunk),
        }
    }
}

impl<R: BufRead> crate::sandbox::OutputWatch for Stream<R> {
    fn feed(&mut self, chunk: &[u8]) -> bool {
        Stream::feed(self, chunk)
    }
}

fn count_newlines(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}

/// How many leading bytes of `out` equal the answer's next ones, stopping
/// before any byte `stops` says no to (on `out`'s side); consumes them
/// from the answer. The answer's buffer is refilled as needed.
fn common_prefix(ans: &mut impl BufRead, out: &[u8], stops: impl Fn(u8) -> bool) -> io::Result<usize> {
    let mut done = 0;
    while done < out.len() {
        let a = ans.fill_buf()?;
        let rest = &out[done..];
        let n = a.len().min(rest.len());
        let same = rest[..n].iter().zip(&a[..n]).position(|(&p, &q)| p != q || stops(p)).unwrap_or(n);
        ans.consume(same);
        done += same;
        if same < n || n == 0 {
            break;
        }
    }
    Ok(done)
}

/// The answer's next byte, not consumed.
fn peek(ans: &mut impl BufRead) -> io::Result<Option<u8>> {
    Ok(ans.fill_buf()?.first().copied())
}

fn exact_step(ans: &mut impl BufRead, chunk: &[u8]) -> io::Result<Option<usize>> {
    let same = common_prefix(ans, chunk, |_| false)?;
    Ok((same < chunk.len()).then_some(same))
}

fn diff_step(ans: &mut impl BufRead, at: &mut DiffAt, after_cr: &mut bool, chunk: &[u8]) -> io::Result<Option<usize>> {
    let mut i = 0;
    while i < chunk.len() {
        if *at == DiffAt::InStep && !*after_cr {
            // Equal bytes in step; a `\r` alone, which may be a line end
            // written otherwise by the other side (`\r\n`), one at a time.
            i += common_prefix(ans, &chunk[i..], |b| b == b'\r')?;
            if i == chunk.len() {
                break;
            }
        }
        let o = chunk[i];
        if std::mem::take(after_cr) && o == b'\n' {
            i += 1;
            continue;
        }
        let ok = match *at {
            DiffAt::AnswerEnded => is_space(o),
            DiffAt::OutputRestBlank => {
                if is_line_end(o) {
                    *at = DiffAt::InStep;
                }
                is_space(o)
            }
            DiffAt::InStep => match peek(ans)? {
                // The answer's lines all matched: the rest must be blank.
                None => {
                    *at = DiffAt::AnswerEnded;
                    is_space(o)
                }
                Some(a) if is_line_end(o) && is_line_end(a) => {
                    skip_line_end(ans)?;
                    true
                }
                // The output's line ended (or diverged where its rest may be
                // trailing white space): the answer's rest must be blank, up to
                // and past its line end.
                Some(a) if is_line_end(o) || o != a => {
                    let blank = rest_of_line_is_blank(ans)?;
                    if blank && !is_line_end(o) {
                        *at = DiffAt::OutputRestBlank;
                    }
                    blank && is_space(o)
                }
                Some(_) => {
                    ans.consume(1);
                    true
                }
            },
        };
        if !ok {
            return Ok(Some(i));
        }
        *after_cr = o == b'\r';
        i += 1;
    }
    Ok(None)
}

fn token_step(ans: &mut impl BufRead, in_token: &mut bool, chunk: &[u8]) -> io::Result<Option<usize>> {
    let mut i = 0;
    while i < chunk.len() {
        if *in_token {
            // Equal bytes in step: the same tokens, the same separators.
            let same = common_prefix(ans, &chunk[i..], |_| false)?;
            if same > 0 {
                *in_token = !is_space(chunk[i + same - 1]);
                i += same;
                continue;
            }
        }
        let o = chunk[i];
        let ok = match (*in_token, is_space(o)) {
            (false, true) => true,
            // A token begins: the answer must have one too.
            (false, false) => skip_space(ans)? && peek(ans)? == Some(o),
            // The output's token ended: the answer's must end here too.
            (true, true) => peek(ans)?.is_none_or(is_space),
            // In step, a byte the answer does not have (or not in this token).
            (true, false) => false,
        };
        if !ok {
            return Ok(Some(i));
        }
        if !is_space(o) {
            ans.consume(1);
        }
        *in_token = !is_space(o);
        i += 1;
    }
    Ok(None)
}

fn float_step(
    ans: &mut impl BufRead,
    (abs, rel): (f64, f64),
    at: &mut FloatAt,
    buf: &mut Vec<u8>,
    abuf: &mut Vec<u8>,
    chunk: &[u8],
) -> io::Result<Option<usize>> {
    let mut i = 0;
    while i < chunk.len() {
        let o = chunk[i];
        // A token's run of bytes within NUMBER_MAX, copied at once.
        if *at != FloatAt::Long && !is_space(o) {
            if *at == FloatAt::Between {
                buf.clear();
                *at = FloatAt::InToken;
            }
            let run = chunk[i..].iter().position(|&b| is_space(b)).unwrap_or(chunk.len() - i);
            let take = run.min(NUMBER_MAX - buf.len());
            buf.extend_from_slice(&chunk[i..i + take]);
            i += take;
            if take == run {
                continue;
            }
        }
        let o = chunk[i];
        let ok = match (*at, is_space(o)) {
            (FloatAt::Between, _) => true,
            // Past NUMBER_MAX bytes: a word, as the answer's must be too,
            // equal in its first NUMBER_MAX bytes; the rest byte by byte.
            (FloatAt::InToken, false) => {
                *at = FloatAt::Long;
                let (m, ended) = answer_token(ans, abuf)?;
                m.is_some_and(|m| !ended && abuf[..m] == buf[..]) && word_byte(ans, o)?
            }
            (FloatAt::Long, false) => word_byte(ans, o)?,
            (FloatAt::Long, true) => {
                *at = FloatAt::Between;
                peek(ans)?.is_none_or(is_space)
            }
            // A token of at most NUMBER_MAX bytes, complete: judged as whole.
            (FloatAt::InToken, true) => {
                *at = FloatAt::Between;
                let (m, ended) = answer_token(ans, abuf)?;
                m.is_some_and(|m| ended && (abuf[..m] == buf[..] || numbers_close(buf, &abuf[..m], abs, rel)))
            }
        };
        if !ok {
            return Ok(Some(i));
        }
        i += 1;
    }
    Ok(None)
}

/// The answer's next token into the start of `abuf` (at most `NUMBER_MAX`
/// bytes, as the whole comparison reads it): its length, `None` when it
/// has none left, and whether the token ended there. `abuf` is made
/// `NUMBER_MAX` long once and never shrunk: zeroing it for each token cost
/// the stream three times the whole comparison's time on short numbers.
fn answer_token(ans: &mut impl BufRead, abuf: &mut Vec<u8>) -> io::Result<(Option<usize>, bool)> {
    if !skip_space(ans)? {
        return Ok((None, true));
    }
    if abuf.len() < NUMBER_MAX {
        abuf.resize(NUMBER_MAX, 0);
    }
    let (m, ended) = read_token(ans, abuf)?;
    Ok((Some(m), ended))
}

/// The output's next byte `o` of a word being compared byte by byte: the
/// answer's word must go on with it.
fn word_byte(ans: &mut impl BufRead, o: u8) -> io::Result<bool> {
    let same = peek(ans)? == Some(o);
    if same {
        ans.consume(1);
    }
    Ok(same)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    /// Counts the bytes each thread allocates, so a test can see what one
    /// call cost the judge while other tests allocate on their own threads.
    struct CountingAllocator;

    thread_local! {
        static ALLOCATED: Cell<u64> = const { Cell::new(0) };
    }

    fn count_allocation(bytes: usize) {
        // `try_with`: a thread being torn down still frees and allocates.
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + bytes as u64));
    }

    // SAFETY: each method only counts, then hands its arguments unchanged to System, which keeps GlobalAlloc's contract.
    unsafe impl GlobalAlloc for CountingAllocator {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count_allocation(layout.size());
            // SAFETY: our caller's guarantees for `layout` are the ones System.alloc needs.
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count_allocation(layout.size());
            // SAFETY: our caller's guarantees for `layout` are the ones System.alloc_zeroed needs.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from System (every allocation here is System's) with this `layout`.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count_allocation(new_size.saturating_sub(layout.size()));
            // SAFETY: `ptr` came from System with `layout`; the caller vouches for `new_size`.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

    /// What `f` returns, and the bytes this thread allocated while it ran.
    fn allocated_by<R>(f: impl FnOnce() -> R) -> (R, u64) {
        let before = ALLOCATED.with(Cell::get);
        let r = f();
        (r, ALLOCATED.with(Cell::get) - before)
    }

    /// A stream made of runs of one byte (`(byte, how many)`), produced as it
    /// is read: a 64 MiB line costs the test nothing.
    struct Runs(Vec<(u8, u64)>);

    impl Read for Runs {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some((byte, left)) = self.0.iter_mut().find(|(_, left)| *left > 0) else {
                return Ok(0);
            };
            let n = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
            buf[..n].fill(*byte);
            *left -= n as u64;
            Ok(n)
        }
    }

    const LONG: u64 = 64 << 20;

    /// Checks two run-made streams through the judge's 64 KiB read buffers:
    /// asserts the verdict and that nothing was allocated but those buffers.
    fn assert_checked_in_fixed_memory(c: &Checker, out: &[(u8, u64)], ans: &[(u8, u64)], ac: bool) {
        let (out, ans) = (Runs(out.to_vec()), Runs(ans.to_vec()));
        let (verdict, bytes) = allocated_by(|| {
            c.check(BufReader::with_capacity(64 * 1024, out), BufReader::with_capacity(64 * 1024, ans)).unwrap()
        });
        assert_eq!(verdict, ac, "{c:?}");
        assert!(bytes <= 2 * 64 * 1024, "{c:?} allocated {bytes} bytes to compare a 64 MiB line");
    }

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
    fn diff_compares_a_64_mib_line_in_fixed_memory() {
        let d = Checker::Diff;
        assert_checked_in_fixed_memory(&d, &[(b'x', LONG), (b' ', 3), (b'\n', 1)], &[(b'x', LONG), (b'\n', 1)], true);
        assert_checked_in_fixed_memory(&d, &[(b'x', LONG), (b'\n', 1)], &[(b'x', 1), (b'\n', 1)], false);
        assert_checked_in_fixed_memory(&d, &[(b'x', LONG), (b'y', 1)], &[(b'x', LONG), (b'z', 1)], false);
        // 64 MiB of trailing white space, then of interior white space.
        assert_checked_in_fixed_memory(&d, &[(b'a', 1), (b'\t', LONG), (b'\r', 1)], &[(b'a', 1)], true);
        let interior = [(b'a', 1), (b' ', LONG), (b'b', 1)];
        assert_checked_in_fixed_memory(&d, &interior, &interior, true);
        assert_checked_in_fixed_memory(&d, &interior, &[(b'a', 1), (b' ', LONG - 1), (b'b', 1)], false);
        // 64 Mi trailing empty lines.
        assert_checked_in_fixed_memory(&d, &[(b'1', 1), (b'\n', LONG)], &[(b'1', 1)], true);
    }

    #[test]
    fn token_compares_a_64_mib_token_in_fixed_memory() {
        let t = Checker::Token;
        assert_checked_in_fixed_memory(&t, &[(b' ', 2), (b'x', LONG), (b'\n', 1)], &[(b'x', LONG)], true);
        assert_checked_in_fixed_memory(&t, &[(b'x', LONG)], &[(b'x', 1)], false);
        assert_checked_in_fixed_memory(&t, &[(b'x', LONG), (b'y', 1)], &[(b'x', LONG), (b'z', 1)], false);
    }

    #[test]
    fn float_compares_a_64_mib_token_in_fixed_memory() {
        let f = Checker::Float { abs: FLOAT_EPS, rel: FLOAT_EPS };
        assert_checked_in_fixed_memory(&f, &[(b'1', LONG), (b'\n', 1)], &[(b'1', LONG)], true);
        assert_checked_in_fixed_memory(&f, &[(b'1', LONG)], &[(b'1', 1)], false);
        assert_checked_in_fixed_memory(&f, &[(b'x', LONG), (b'y', 1)], &[(b'x', LONG), (b'z', 1)], false);
    }

    /// SplitMix64: reproducible random inputs without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
            xs[self.below(xs.len())]
        }
    }

    /// Random text of lines: unrelated pairs disagree, so also the same lines
    /// written differently (trailing white space, terminators, blank lines
    /// at the end), which Normal-OJ's rule takes as equal.
    fn random_text(rng: &mut Rng, lines: &[String]) -> String {
        const TRAILING: [&str; 6] = ["", "", " ", "\t", "\x0b\x0c", " \t "];
        let mut s = String::new();
        let blank_lines_after = rng.below(3);
        for (i, line) in lines.iter().chain(std::iter::repeat_n(&String::new(), blank_lines_after)).enumerate() {
            let piece = format!("{line}{}", rng.pick(&TRAILING));
            let last = i + 1 == lines.len() + blank_lines_after;
            // A lone `\r` before an empty line ended by `\n` would make one `\r\n`.
            let terminators: &[&str] =
                if piece.is_empty() && s.ends_with('\r') { &["\r\n", "\r"] } else { &["\n", "\r\n", "\r"] };
            let terminator = if last && rng.below(3) == 0 { "" } else { rng.pick(terminators) };
            s.push_str(&piece);
            s.push_str(terminator);
        }
        s
    }

    fn random_lines(rng: &mut Rng) -> Vec<String> {
        const BYTES: [char; 7] = ['a', 'b', ' ', ' ', '\t', '\x0b', '\x0c'];
        (0..rng.below(5)).map(|_| (0..rng.below(5)).map(|_| rng.pick(&BYTES)).collect()).collect()
    }

    fn random_bytes(rng: &mut Rng) -> String {
        const BYTES: [char; 8] = ['a', 'b', ' ', '\t', '\r', '\n', '\x0b', '\x0c'];
        (0..rng.below(12)).map(|_| rng.pick(&BYTES)).collect()
    }

    /// Checks `out` against `ans` read through every pair of tiny buffers, so
    /// buffer boundaries fall everywhere (inside `\r\n` too).
    fn check_through_tiny_buffers(c: &Checker, out: &str, ans: &str) -> bool {
        let verdict = run(c.clone(), out, ans);
        for out_cap in [1, 2, 3, 7] {
            for ans_cap in [1, 2, 3, 7] {
                let got = c
                    .check(
                        BufReader::with_capacity(out_cap, out.as_bytes()),
                        BufReader::with_capacity(ans_cap, ans.as_bytes()),
                    )
                    .unwrap();
                assert_eq!(got, verdict, "{c:?} {out:?} vs {ans:?} through {out_cap}/{ans_cap} byte buffers");
            }
        }
        verdict
    }

    /// An output and an answer by turns: random bytes, two texts of the
    /// same lines, two texts of lines of their own.
    fn random_pair(rng: &mut Rng, round: usize) -> (String, String) {
        match round % 3 {
            0 => (random_bytes(rng), random_bytes(rng)),
            1 => {
                let lines = random_lines(rng);
                (random_text(rng, &lines), random_text(rng, &lines))
            }
            _ => {
                let (a, b) = (random_lines(rng), random_lines(rng));
                (random_text(rng, &a), random_text(rng, &b))
            }
        }
    }

    #[test]
    fn diff_agrees_with_normal_ojs_strip_on_random_text_through_tiny_buffers() {
        let mut rng = Rng(9);
        let mut equal = 0;
        for round in 0..3000 {
            let (out, ans) = random_pair(&mut rng, round);
            let want = python_strip(&out) == python_strip(&ans);
            assert_eq!(check_through_tiny_buffers(&Checker::Diff, &out, &ans), want, "{out:?} vs {ans:?}");
            equal += usize::from(want);
        }
        // Both verdicts are exercised, not only WA.
        assert!((500..2500).contains(&equal), "{equal} of 3000 equal");
    }

    /// The token checkers' rule written out on whole token lists, to compare against.
    fn tokens_equal(out: &str, ans: &str, same: impl Fn(&[u8], &[u8]) -> bool) -> bool {
        fn tokens(s: &str) -> Vec<&[u8]> {
            s.as_bytes().split(|&b| is_space(b)).filter(|t| !t.is_empty()).collect()
        }
        let (a, b) = (tokens(out), tokens(ans));
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| same(x, y))
    }

    #[test]
    fn token_and_float_agree_with_whole_token_lists_on_random_text_through_tiny_buffers() {
        const TOKENS: [&str; 10] = ["1", "1.0", "1.0000001", "-0", "0", "abc", "1e3", "1000", "+.5", "0.5"];
        const SPACES: [&str; 6] = [" ", "\n", "\r\n", "\t\x0b", "\x0c\r", "  "];
        let (abs, rel) = (FLOAT_EPS, FLOAT_EPS);
        let float_equal = |x: &[u8], y: &[u8]| {
            x == y || matches!((number(x), number(y)), (Some(x), Some(y)) if (x - y).abs() <= abs.max(rel * y.abs()))
        };
        let mut rng = Rng(12);
        let text = |rng: &mut Rng| {
            let mut s: String = (0..rng.below(2)).map(|_| rng.pick(&SPACES)).collect();
            for _ in 0..rng.below(4) {
                s.push_str(rng.pick(&TOKENS));
                s.push_str(rng.pick(&SPACES));
            }
            if rng.below(2) == 0 {
                s.truncate(s.trim_end_matches(|c: char| is_space(c as u8)).len());
            }
            s
        };
        let (mut token_equal, mut float_equal_count) = (0, 0);
        for _ in 0..2000 {
            let (out, ans) = (text(&mut rng), text(&mut rng));
            let want = tokens_equal(&out, &ans, |x, y| x == y);
            assert_eq!(check_through_tiny_buffers(&Checker::Token, &out, &ans), want, "{out:?} vs {ans:?}");
            token_equal += usize::from(want);
            let want = tokens_equal(&out, &ans, float_equal);
            let got = check_through_tiny_buffers(&Checker::Float { abs, rel }, &out, &ans);
            assert_eq!(got, want, "{out:?} vs {ans:?}");
            float_equal_count += usize::from(want);
        }
        assert!(token_equal > 100 && float_equal_count > token_equal, "{token_equal}, {float_equal_count}");
    }

    /// Feeds `out` to `c`'s stream against `ans` in chunks of `size` bytes:
    /// where it diverged, if it did.
    fn streamed(c: &Checker, out: &[u8], ans: &[u8], size: usize, ans_cap: usize) -> Option<Divergence> {
        let mut s = Stream::of(c, BufReader::with_capacity(ans_cap, ans)).unwrap();
        for chunk in out.chunks(size.max(1)) {
            if !s.feed(chunk) {
                assert!(!s.feed(b"x"), "said no, then yes");
                return s.diverged();
            }
        }
        s.diverged()
    }

    /// The streaming comparison's promise on one pair, through chunks and
    /// answer buffers of every small size: it never says no to an output
    /// the whole comparison accepts, and wherever it says no, no output
    /// that begins with what it was fed is accepted (the whole output, and
    /// its prefix at the divergence with any tail from `tails`). Whether it
    /// diverged.
    fn assert_stream_sound(c: &Checker, out: &str, ans: &str, tails: &[&str]) -> bool {
        let whole = c.check(out.as_bytes(), ans.as_bytes()).unwrap();
        let mut diverged = None;
        for size in [1, 2, 3, 5, 64] {
            for ans_cap in [1, 2, 7, 4096] {
                let d = streamed(c, out.as_bytes(), ans.as_bytes(), size, ans_cap);
                assert!(!(whole && d.is_some()), "{c:?}: {out:?} vs {ans:?} is accepted, but streamed no at {d:?}");
                // The same place whatever the chunks.
                if size > 1 || ans_cap > 1 {
                    assert_eq!(d, diverged, "{c:?}: {out:?} vs {ans:?} through {size}/{ans_cap}");
                }
                diverged = d;
            }
        }
        if let Some(d) = diverged {
            let fed = &out[..=d.byte as usize];
            for tail in tails {
                let longer = format!("{fed}{tail}");
                assert!(
                    !c.check(longer.as_bytes(), ans.as_bytes()).unwrap(),
                    "{c:?}: no at {d} of {out:?}, yet {longer:?} is accepted for {ans:?}"
                );
            }
            assert_eq!(d.line, out[..d.byte as usize].matches('\n').count() as u64 + 1);
        }
        diverged.is_some()
    }

    const TAILS: [&str; 6] = ["", " ", "\n", "\r\n", "   \n\n", "\t"];

    fn checkers() -> [Checker; 4] {
        [Checker::Diff, Checker::Exact, Checker::Token, Checker::Float { abs: FLOAT_EPS, rel: FLOAT_EPS }]
    }

    #[test]
    fn a_stream_never_says_no_to_an_accepted_output_on_random_text() {
        let mut rng = Rng(26);
        let mut said_no = [0; 4];
        for round in 0..1500 {
            let (out, ans) = random_pair(&mut rng, round);
            for (k, c) in checkers().iter().enumerate() {
                said_no[k] += usize::from(assert_stream_sound(c, &out, &ans, &TAILS));
            }
        }
        // Every stream says no, often: these are tests of a comparison, not of silence.
        assert!(said_no.iter().all(|&n| n > 300), "{said_no:?} of 1500");
    }

    #[test]
    fn a_float_stream_judges_a_token_only_once_it_is_complete() {
        const TOKENS: [&str; 12] =
            ["1", "1.0", "1.0000001", "-0", "0", "abc", "1e3", "1000", "+.5", "0.5", "nan", "-inf"];
        const SPACES: [&str; 4] = [" ", "\n", "\r\n", "\t"];
        let f = Checker::Float { abs: FLOAT_EPS, rel: FLOAT_EPS };
        let mut rng = Rng(27);
        let text = |rng: &mut Rng| {
            let mut s = String::new();
            for _ in 0..rng.below(5) {
                s.push_str(rng.pick(&TOKENS));
                s.push_str(rng.pick(&SPACES));
            }
            s
        };
        let (mut no, mut accepted) = (0, 0);
        for _ in 0..2000 {
            let (out, ans) = (text(&mut rng), text(&mut rng));
            no += usize::from(assert_stream_sound(&f, &out, &ans, &["0", "5", "e3", ""]));
            accepted += usize::from(f.check(out.as_bytes(), ans.as_bytes()).unwrap());
        }
        assert!(no > 500 && accepted > 50, "{no} said no, {accepted} accepted");
        // A prefix of a number is no number yet: "1" may become "1.0000001".
        for ans in ["1.0000001 2", "10", "1e3"] {
            assert_eq!(streamed(&f, b"1", ans.as_bytes(), 1, 4096), None, "{ans}");
        }
        assert_eq!(streamed(&f, b"1 ", b"2", 1, 4096).map(|d| d.byte), Some(1), "judged at its separator");
        assert_eq!(streamed(&f, b"1.0000001\n", b"1\n", 1, 4096), None, "within the tolerance");
    }

    #[test]
    fn streams_say_where_the_output_diverged() {
        let at = |c: &Checker, out: &str, ans: &str| streamed(c, out.as_bytes(), ans.as_bytes(), 64, 4096);
        let d = |byte, line| Some(Divergence { byte, line });
        // The wrong first line of a program that would go on computing.
        assert_eq!(at(&Checker::Diff, "4\n", "3\n"), d(0, 1));
        assert_eq!(at(&Checker::Diff, "1\n2\n3 4\n", "1\n2\n3\n"), d(6, 3), "where the line cannot be trailing space");
        assert_eq!(at(&Checker::Diff, "1\n2\n3 ", "1\n2\n3\n"), None, "trailing space so far");
        assert_eq!(at(&Checker::Diff, "1\n\n2", "1\n2\n"), d(2, 2), "an inner blank line");
        assert_eq!(at(&Checker::Diff, "1\n\n\n  \n", "1\n"), None, "trailing blank lines");
        assert_eq!(at(&Checker::Diff, "1\n\nx", "1\n"), d(3, 3), "past the answer's end");
        assert_eq!(at(&Checker::Diff, "a\rb\r\n", "a\nb\n"), None, "line ends written otherwise");
        assert_eq!(at(&Checker::Exact, "3 \n", "3\n"), d(1, 1));
        assert_eq!(at(&Checker::Exact, "3\n\n", "3\n"), d(2, 2), "longer than the answer");
        assert_eq!(at(&Checker::Token, "1  2\n3", "1 2 3\n"), None);
        assert_eq!(at(&Checker::Token, "1 23", "1 2 3"), d(3, 1), "a token longer than the answer's");
        assert_eq!(at(&Checker::Token, "1 2 ", "1 23"), d(3, 1), "a token shorter than the answer's");
        assert_eq!(at(&Checker::Token, "1 2 3 4", "1 2 3"), d(6, 1), "one token too many");
        assert_eq!(Divergence { byte: 6, line: 3 }.to_string(), "byte 6 (line 3)");
    }

    #[test]
    fn a_float_stream_reads_long_tokens_as_the_whole_comparison_does() {
        let f = Checker::Float { abs: FLOAT_EPS, rel: FLOAT_EPS };
        let one = |len: usize| format!("1.{}", "0".repeat(len - 2));
        let long_word = "x".repeat(NUMBER_MAX + 10);
        let pairs = [
            (format!("{} 2", one(NUMBER_MAX)), "1 2".to_string()),
            (format!("{} 2", one(NUMBER_MAX + 1)), "1 2".to_string()),
            ("1 2".to_string(), format!("{} 2", one(NUMBER_MAX + 1))),
            (format!("{long_word}y 1"), format!("{long_word}y 1.0")),
            (format!("{long_word}y 1"), format!("{long_word}z 1")),
            (format!("{long_word}y 1"), format!("{long_word}yy 1")),
            (format!("{long_word}yy 1"), format!("{long_word}y 1")),
            (format!("{long_word} 1"), format!("{} 1", &long_word[..NUMBER_MAX])),
        ];
        for (out, ans) in &pairs {
            assert_stream_sound(&f, out, ans, &TAILS);
        }
    }

    #[test]
    fn a_stream_compares_a_64_mib_answer_in_fixed_memory() {
        // The answer read as the output goes: its buffer, never its whole.
        for c in checkers() {
            let ans = BufReader::with_capacity(64 * 1024, Runs(vec![(b'7', LONG), (b'\n', 1)]));
            let (said, bytes) = allocated_by(|| {
                let mut s = Stream::of(&c, ans).unwrap();
                let chunk = vec![b'7'; 64 * 1024];
                let fine = (0..(LONG / chunk.len() as u64)).all(|_| s.feed(&chunk));
                (fine, s.feed(b"8"))
            });
            assert_eq!(said, (true, false), "{c:?}");
            assert!(bytes <= 3 * 64 * 1024 + 2 * NUMBER_MAX as u64, "{c:?} allocated {bytes} bytes");
        }
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
        assert_eq!(parse(None), Ok(Named::Builtin(Checker::Diff)));
        assert_eq!(parse(Some("diff")), Ok(Named::Builtin(Checker::Diff)));
        assert_eq!(parse(Some("print(\"not implement yet. qaq\")")), Ok(Named::Builtin(Checker::Diff)));
        assert_eq!(parse(Some("token")), Ok(Named::Builtin(Checker::Token)));
        assert_eq!(parse(Some("exact")), Ok(Named::Builtin(Checker::Exact)));
        assert_eq!(parse(Some("float")), Ok(Named::Builtin(Checker::Float { abs: 1e-6, rel: 1e-6 })));
        assert_eq!(parse(Some(" float:1e-4 ")), Ok(Named::Builtin(Checker::Float { abs: 1e-4, rel: 1e-4 })));
        assert_eq!(parse(Some("float:abs=0.5")), Ok(Named::Builtin(Checker::Float { abs: 0.5, rel: 0.0 })));
        assert_eq!(parse(Some("float:abs=1e-3,rel=1e-9")), Ok(Named::Builtin(Checker::Float { abs: 1e-3, rel: 1e-9 })));
        assert_eq!(parse(Some("special")), Ok(Named::Special), "compiled by the judge");
        assert_eq!(parse(Some("interactive")), Ok(Named::Interactive));
        assert_eq!(parse(Some("icpc")), Ok(Named::Icpc));
        assert_eq!(parse(Some("icpc-interactive")), Ok(Named::IcpcInteractive));
        assert!(parse(Some("float:x")).is_err());
        assert!(parse(Some("float:-1")).is_err());
        assert!(parse(Some("float:nan")).is_err());
        assert!(parse(Some("float:abs=1,bogus=2")).is_err());
        assert_eq!(parse(Some("special")), Ok(Named::Special));
        assert_eq!(parse(None), Ok(Named::Builtin(Checker::Diff)));
    }

    #[test]
    fn float_compares_numbers_within_tolerance() {
        let f = |eps: f64| Checker::Float { abs: eps, rel: eps };
        assert!(run(f(1e-6), "3.1415926\n", "3.14159260000001"));
        assert!(run(f(1e-6), "0.3333333", "0.33333333333"));
        assert!(!run(f(1e-6), "0.33333", "0.33333333333"));
        assert!(run(f(1e-4), "0.33333", "0.33333333333"));
        // Relative: 1e12 off by 1000 is within 1e-6 of it.
        assert!(run(f(1e-6), "1000000001000", "1e12"));
        assert!(!run(Checker::Float { abs: 1e-6, rel: 0.0 }, "1000000001000", "1e12"));
        // Words must match exactly; counts must match.
        assert!(run(f(1e-6), "YES 1.0000001", "YES 1"));
        assert!(!run(f(1e-6), "yes 1", "YES 1"));
        assert!(!run(f(1e-6), "1 2", "1 2 3"));
        assert!(!run(f(1e-6), "nan", "0"));
        assert!(!run(f(1e-6), "inf", "1e308"));
        assert!(run(f(1e-6), "-0.0000001", "0"));
    }

    #[test]
    fn float_compares_non_finite_values_by_value_in_any_case() {
        let f = Checker::Float { abs: FLOAT_EPS, rel: FLOAT_EPS };
        let same = |out: &str, ans: &str| run(f.clone(), out, ans);
        // NaN is NaN, however spelled and signed (glibc prints `-nan`).
        for out in ["nan", "NaN", "NAN", "-nan", "+NaN", "nan(0x8)", "-NaN(abc_1)"] {
            assert!(same(out, "nan"), "{out}");
            assert!(same(&format!("1 {out} 2\n"), "1.0000001 NaN 2"), "{out}");
        }
        // Infinities: the same sign, however spelled.
        for out in ["inf", "Inf", "INF", "+inf", "infinity", "Infinity", "+INFINITY"] {
            assert!(same(out, "inf"), "{out}");
            assert!(same(out, "Infinity"), "{out}");
            assert!(!same(out, "-inf"), "{out}");
        }
        for out in ["-inf", "-Inf", "-infinity", "-INFINITY"] {
            assert!(same(out, "-Inf"), "{out}");
            assert!(!same(out, "inf"), "{out}");
        }
        // A finite answer is never matched by a non-finite output, nor the other way.
        for (out, ans) in [("nan", "0"), ("inf", "1e308"), ("-inf", "-1e308"), ("nan", "inf"), ("inf", "nan")] {
            assert!(!same(out, ans), "{out} for {ans}");
            assert!(!same(ans, out), "{ans} for {out}");
        }
        assert!(!run(Checker::Float { abs: f64::MAX, rel: f64::MAX }, "inf", "1"), "no tolerance reaches infinity");
        // Only those words: the rest are words compared byte by byte.
        assert!(same("nan()", "NaN"), "an empty payload");
        for out in ["nana", "info", "infinit", "nan(", "nan(a-b)", "nan()x", "in", "--inf", "inf-", "1e999"] {
            assert!(!same(out, "nan") && !same(out, "inf"), "{out}");
            assert!(same(out, out), "{out}");
        }
        assert!(!same("Nana", "nana"), "words keep their case");
    }

    #[test]
    fn float_reads_tokens_of_at_most_4096_bytes_as_numbers() {
        let f = Checker::Float { abs: FLOAT_EPS, rel: FLOAT_EPS };
        let one = |len: usize| format!("1.{}", "0".repeat(len - 2));
        assert_eq!(one(NUMBER_MAX).len(), 4096);
        // Through tiny buffers, so the 4096th byte also ends a read.
        assert!(check_through_tiny_buffers(&f, &one(NUMBER_MAX), "1"));
        assert!(check_through_tiny_buffers(&f, &format!("2 {} 3\n", one(NUMBER_MAX)), "2.0000001 1 3"));
        assert!(!check_through_tiny_buffers(&f, &one(NUMBER_MAX + 1), "1"));
        assert!(!check_through_tiny_buffers(&f, "1", &one(NUMBER_MAX + 1)));
        assert!(check_through_tiny_buffers(
            &f,
            &format!("{} 1", one(NUMBER_MAX + 1)),
            &format!("{} 1.0", one(NUMBER_MAX + 1))
        ));
        let long_word = "x".repeat(3 * NUMBER_MAX);
        assert!(check_through_tiny_buffers(&f, &format!("{long_word}y"), &format!("{long_word}y\n")));
        assert!(!check_through_tiny_buffers(&f, &format!("{long_word}y"), &format!("{long_word}z")));
        assert!(!check_through_tiny_buffers(&f, &format!("{long_word}y"), &format!("{long_word}yy")));
        assert!(!check_through_tiny_buffers(&f, &format!("y{long_word}"), &format!("z{long_word}")));
    }

    #[test]
    fn program_checkers_are_shared_and_cannot_compare_streams() {
        let a = Program::new(PathBuf::from("/x/y/main"));
        let b = a.clone();
        assert!(Arc::ptr_eq(&a.binary, &b.binary));
        assert_eq!(a.dir(), Path::new("/x/y"));
        assert!(Checker::Special(a).check("1".as_bytes(), "1".as_bytes()).is_err());
        assert!(Checker::Unprepared.check("1".as_bytes(), "1".as_bytes()).is_err());
    }

    #[test]
    fn files_are_checked_and_a_missing_file_is_an_error() {
        let dir = ojrunner_daemon::test_dir("ojchk");
        std::fs::write(dir.join("out"), "42 \n").unwrap();
        std::fs::write(dir.join("ans"), "42\n").unwrap();
        let mut out = File::open(dir.join("out")).unwrap();
        assert!(Checker::Diff.check_output(&mut out, &dir.join("ans")).unwrap());
        let e = Checker::Diff.check_output(&mut out, &dir.join("nope")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Java's entry point, found in the source: the top-level class that
//! declares `main`, the file name javac requires of it, and its package.
//!
//! A lenient scan, not a parser: one pass over the text that skips
//! comments, string, text-block and character literals, counts braces, and
//! looks only at top-level type declarations (depth 0) and their members
//! (depth 1). javac judges the rest; the scan only has to pick the same
//! class javac and `java` would need. Its memory is a few words per
//! top-level type, whatever the source.

/// What a Java source needs to be compiled and run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JavaEntry {
    /// The file name javac requires: `<public type>.java`, or `fallback`
    /// when no top-level type is public.
    pub file: String,
    /// The class `java` runs, qualified by its package (`a.b.Solver`).
    pub class: String,
}

/// The longest class name the judge gives a file (a file name is at most
/// 255 bytes; `.java` and room to spare).
const MAX_NAME_BYTES: usize = 200;

/// One top-level type of the source.
#[derive(Debug)]
struct TopType {
    name: String,
    public: bool,
    /// An interface: its methods are public without saying so.
    interface: bool,
    declares_main: bool,
}

/// The entry of `source`: the top-level type that declares `public static
/// void main(String[])` (the public one; else one named `Main`; else the
/// only one), compiled as the public type's file (else `fallback`, the
/// table's name). `Err`: why there is none, for the CE message.
pub fn find_entry(source: &str, fallback: &str) -> Result<JavaEntry, String> {
    let scan = scan(source);
    let with_main: Vec<&TopType> = scan.types.iter().filter(|t| t.declares_main).collect();
    let chosen = with_main
        .iter()
        .find(|t| t.public)
        .or_else(|| with_main.iter().find(|t| t.name == "Main"))
        .or_else(|| if with_main.len() == 1 { with_main.first() } else { None });
    let Some(chosen) = chosen else {
        return Err(if with_main.is_empty() {
            "no class declares public static void main(String[] args): the public class that does is the one run"
                .to_string()
        } else {
            let names: Vec<&str> = with_main.iter().map(|t| t.name.as_str()).collect();
            format!(
                "{} classes declare main ({}) and none is public: make public the one to run",
                names.len(),
                names.join(", ")
            )
        });
    };
    let file = match scan.types.iter().find(|t| t.public) {
        Some(public) => format!("{}.java", public.name),
        None => fallback.to_string(),
    };
    for name in [&chosen.name, &file] {
        if name.len() > MAX_NAME_BYTES {
            let start: String = name.chars().take(32).collect();
            return Err(format!("the class name {start}... is longer than {MAX_NAME_BYTES} bytes"));
        }
    }
    let class = match scan.package {
        Some(p) if !p.is_empty() => format!("{p}.{}", chosen.name),
        _ => chosen.name.clone(),
    };
    Ok(JavaEntry { file, class })
}

/// What the scan found: the package and the top-level types.
#[derive(Debug, Default)]
struct Scan {
    package: Option<String>,
    types: Vec<TopType>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Punct(char),
}

/// The source's words (identifiers, keywords, numbers) and punctuation,
/// without comments, literals or white space.
struct Tokens<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        loop {
            let rest = &self.text[self.at..];
            let c = rest.chars().next()?;
            if c.is_whitespace() {
                self.at += c.len_utf8();
            } else if rest.starts_with("//") {
                self.at += rest.find('\n').unwrap_or(rest.len());
            } else if let Some(body) = rest.strip_prefix("/*") {
                self.at += 2 + body.find("*/").map_or(body.len(), |end| end + 2);
            } else if let Some(body) = rest.strip_prefix("\"\"\"") {
                self.at += 3 + literal_end(body, "\"\"\"", false);
            } else if c == '"' || c == '\'' {
                let quote = if c == '"' { "\"" } else { "'" };
                self.at += 1 + literal_end(&rest[1..], quote, true);
            } else if c.is_alphanumeric() || c == '_' || c == '$' {
                let len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(rest.len());
                self.at += len;
                return Some(Token::Word(&rest[..len]));
            } else {
                self.at += c.len_utf8();
                return Some(Token::Punct(c));
            }
        }
    }
}

/// Bytes of `body` up to and including its closing `quote` (a backslash
/// escapes the next character); a one-line literal also ends at its line's
/// end, so an unclosed quote cannot hide the rest of the source.
fn literal_end(body: &str, quote: &str, one_line: bool) -> usize {
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if body[i..].starts_with(quote) {
            return i + quote.len();
        } else if one_line && c == '\n' {
            return i;
        }
    }
    body.len()
}

/// Where the scan is within a member of a top-level type: which of
/// `public`, `static`, `void main(` it has seen, then the parameters.
#[derive(Debug, Default)]
struct Member {
    public: bool,
    static_: bool,
    /// The previous token was `void`.
    after_void: bool,
    /// `void main` seen: the next token must be `(`.
    named_main: bool,
    /// Inside `main(`'s parentheses: their depth, and what was seen.
    params: Option<Params>,
}

#[derive(Debug, Default)]
struct Params {
    depth: usize,
    string: bool,
    array: bool,
    dots: usize,
    comma: bool,
}

fn scan(source: &str) -> Scan {
    let mut found = Scan::default();
    let mut depth = 0usize;
    // Depth 0: the declaration being read.
    let (mut public, mut kind, mut in_package) = (false, None::<&str>, false);
    let mut package = String::new();
    let mut pending: Option<TopType> = None;
    // Depth 1 of a top-level type (its index): the member being read.
    let mut current: Option<usize> = None;
    let mut member = Member::default();
    for token in (Tokens { text: source, at: 0 }) {
        if depth == 1 {
            if let Some(t) = current {
                if member_token(&mut member, &token) {
                    let interface = found.types[t].interface;
                    found.types[t].declares_main |= member.static_ && (member.public || interface);
                }
            }
        }
        match token {
            Token::Punct('{') => {
                if depth == 0 {
                    if let Some(t) = pending.take() {
                        found.types.push(t);
                        current = Some(found.types.len() - 1);
                    }
                    (public, kind) = (false, None);
                }
                depth += 1;
                member = Member::default();
            }
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    (public, kind, current) = (false, None, None);
                }
                member = Member::default();
            }
            Token::Punct(';') if depth == 0 => {
                if in_package {
                    found.package.get_or_insert(std::mem::take(&mut package));
                    in_package = false;
                }
                (public, kind) = (false, None);
            }
            Token::Punct(';') if depth == 1 => member = Member::default(),
            Token::Punct('.') if in_package => package.push('.'),
            Token::Word(w) if depth == 0 => {
                if in_package {
                    package.push_str(w);
                } else if let Some(k) = kind.take() {
                    let interface = k == "interface";
                    pending = Some(TopType { name: w.to_string(), public, interface, declares_main: false });
                } else {
                    match w {
                        "package" if found.package.is_none() && found.types.is_empty() => in_package = true,
                        "public" => public = true,
                        "class" | "interface" | "enum" | "record" => kind = Some(w),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// Feeds one token of a member at depth 1; true when it completes a
/// `void main(String[] ...)` with the modifiers seen so far in `m`.
fn member_token(m: &mut Member, token: &Token<'_>) -> bool {
    if let Some(p) = &mut m.params {
        match token {
            Token::Punct('(') => p.depth += 1,
            Token::Punct(')') if p.depth == 0 => {
                let one_string_array = p.string && (p.array || p.dots >= 3) && !p.comma;
                m.params = None;
                return one_string_array;
            }
            Token::Punct(')') => p.depth -= 1,
            Token::Punct(',') if p.depth == 0 => p.comma = true,
            Token::Punct('[') => p.array = true,
            Token::Punct('.') => p.dots += 1,
            Token::Word("String") => {
                p.string = true;
                p.dots = 0;
            }
            _ => {}
        }
        return false;
    }
    if m.named_main {
        m.named_main = false;
        if *token == Token::Punct('(') {
            m.params = Some(Params::default());
            return false;
        }
    }
    match token {
        Token::Word("public") => m.public = true,
        Token::Word("static") => m.static_ = true,
        Token::Word("main") if m.after_void => m.named_main = true,
        _ => {}
    }
    m.after_void = *token == Token::Word("void");
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(source: &str) -> Result<JavaEntry, String> {
        find_entry(source, "Main.java")
    }

    fn ok(file: &str, class: &str) -> Result<JavaEntry, String> {
        Ok(JavaEntry { file: file.into(), class: class.into() })
    }

    #[test]
    fn the_public_class_with_main_is_run_from_its_own_file() {
        for (source, class) in [
            (
                "import java.util.*;\npublic class Solution {\n  public static void main(String[] args) {}\n}\n",
                "Solution",
            ),
            ("public final class A { static public void main(final String... argv) throws Exception {} }", "A"),
            ("public class B { public static void main(String args[]) {} }", "B"),
            ("public class C { public static void main(java.lang.String[] a) {} }", "C"),
        ] {
            assert_eq!(entry(source), ok(&format!("{class}.java"), class), "{source}");
        }
    }

    #[test]
    fn a_package_qualifies_the_class() {
        let s =
            "/* header */ package contest . round1;\npublic class Solver { public static void main(String[] a) {} }";
        assert_eq!(entry(s), ok("Solver.java", "contest.round1.Solver"));
    }

    #[test]
    fn main_keeps_working_public_or_not() {
        assert_eq!(entry("public class Main { public static void main(String[] a) {} }"), ok("Main.java", "Main"));
        assert_eq!(entry("class Main { public static void main(String[] a) {} }"), ok("Main.java", "Main"));
        // Two candidates, neither public: Main wins.
        let two = "class Helper { public static void main(String[] a) {} }\nclass Main { public static void main(String[] a) {} }";
        assert_eq!(entry(two), ok("Main.java", "Main"));
    }

    #[test]
    fn comments_strings_and_characters_do_not_fool_it() {
        let s = r#"
            // public class Decoy { public static void main(String[] a) {} }
            /* public class Other { public static void main(String[] a) {} } */
            class Helper {
                static String s = "public class Fake { public static void main(String[] a) {} }";
                static String escaped = "\" { ";
                static char brace = '{', quote = '\'';
                static String block = """
                    } public class Block { public static void main(String[] a) {} } \"""
                    """;
            }
            public class Answer { public static void main(String[] args) {} }
        "#;
        assert_eq!(entry(s), ok("Answer.java", "Answer"));
    }

    #[test]
    fn only_a_real_main_counts() {
        let cases = [
            "public class A { public void main(String[] a) {} }",
            "public class A { static void main(String[] a) {} }",
            "public class A { public static int main(String[] a) { return 0; } }",
            "public class A { public static void main(String a) {} }",
            "public class A { public static void main(String[] a, int b) {} }",
            "public class A { public static void main() {} }",
            "public class A { static class B { public static void main(String[] a) {} } }",
            "public class A { public static void solve() { main(new String[0]); } }",
        ];
        for s in cases {
            assert!(entry(s).unwrap_err().contains("no class declares"), "{s}");
        }
        // An interface's methods are public without saying so.
        assert_eq!(entry("public interface I { static void main(String[] a) {} }"), ok("I.java", "I"));
        // Members before main, with bodies, initializers and annotations.
        let s = "public class A { int[] x = {1, 2}; static int f(int a) { return a; }\n\
                 @SuppressWarnings(\"x\") public static void main(String[] a) {} }";
        assert_eq!(entry(s), ok("A.java", "A"));
        let e = "public enum E { X, Y; public static void main(String[] a) {} }";
        assert_eq!(entry(e), ok("E.java", "E"));
        let r = "public record R(int x) { public static void main(String[] a) {} }";
        assert_eq!(entry(r), ok("R.java", "R"));
    }

    #[test]
    fn the_file_is_the_public_types_and_the_class_the_one_with_main() {
        let s = "public class Api {}\nclass Run { public static void main(String[] a) {} }";
        assert_eq!(entry(s), ok("Api.java", "Run"));
    }

    #[test]
    fn without_a_main_it_says_why() {
        assert!(entry("").unwrap_err().contains("public static void main"));
        let two =
            "class A { public static void main(String[] a) {} }\nclass B { public static void main(String[] a) {} }";
        let why = entry(two).unwrap_err();
        assert!(why.contains("A, B") && why.contains("none is public"), "{why}");
        for letter in ["X", "é"] {
            let long = format!("public class {} {{ public static void main(String[] a) {{}} }}", letter.repeat(300));
            assert!(entry(&long).unwrap_err().contains("longer than"));
        }
    }

    #[test]
    fn broken_sources_end_the_scan_without_panicking() {
        for s in ["public class A {", "\"", "'", "/*", "\"\"\"", "}}}} public class", "package", "package a.", "é"] {
            let _ = entry(s);
        }
        // Unicode identifiers are Java's too.
        let s = "public class Ünïcode { public static void main(String[] a) {} }";
        assert_eq!(entry(s), ok("Ünïcode.java", "Ünïcode"));
    }
}

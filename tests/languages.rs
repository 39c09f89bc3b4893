//! Languages judged as other judges judge them (issue #24): threads at any
//! memory limit, deep recursion on the main thread, Java's class named by
//! the submission, Python's syntax errors as CE. Every case goes through
//! `judge-exec run`: the real binary, the real sandbox, the built-in table.

use std::process::Command;
use testkit::TempDir;

/// What `judge-exec run` said of one submission with one case: the case's
/// line (status, stdout, stderr...) as JSON.
fn judged(language: &str, file: &str, source: &str, input: &str, answer: &str, memory_kib: u64, time_ms: u64) -> Case {
    let dir = TempDir::new(&format!("lang-{language}"));
    let tests = dir.path().join("tests");
    std::fs::create_dir(&tests).unwrap();
    std::fs::write(tests.join("0000.in"), input).unwrap();
    std::fs::write(tests.join("0000.out"), answer).unwrap();
    let src = dir.path().join(file);
    std::fs::write(&src, source).unwrap();
    let out = Command::new(testkit::bin("judge-exec"))
        .args(["run", "--lang", language, "--mem", &memory_kib.to_string(), "--time", &time_ms.to_string()])
        .arg("--src")
        .arg(&src)
        .arg("--tests")
        .arg(&tests)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let line = stdout
        .lines()
        .find(|l| l.contains(r#""case":"0000""#))
        .unwrap_or_else(|| panic!("judge-exec run printed no case:\n{stdout}\n{stderr}"));
    Case(serde_json::from_str(line).unwrap())
}

/// One case's line of `judge-exec run`.
struct Case(serde_json::Value);

impl Case {
    fn status(&self) -> &str {
        self.0["status"].as_str().unwrap_or("?")
    }

    fn stderr(&self) -> &str {
        self.0["stderr"].as_str().unwrap_or("")
    }

    /// Panics, showing the whole case, unless its status is `want`.
    fn expect(&self, want: &str, what: &str) {
        assert_eq!(self.status(), want, "{what}: {}", self.0);
    }
}

const TWO_GIB_KIB: u64 = 2 << 20;

/// Eight threads with default attributes, each joined.
const C_THREADS: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
static void *work(void *arg) { return arg; }
int main(void) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        int e = pthread_create(&t[i], NULL, work, NULL);
        if (e) { fprintf(stderr, "thread %d: %s\n", i, strerror(e)); return 1; }
    }
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    puts("ok");
    return 0;
}
"#;

#[test]
fn a_c_program_starts_eight_threads_at_any_memory_limit() {
    for memory_kib in [TWO_GIB_KIB, 256 << 10, 64 << 10] {
        judged("c11", "threads.c", C_THREADS, "", "ok\n", memory_kib, 5000)
            .expect("AC", &format!("8 pthreads under {memory_kib} KiB"));
    }
}

#[test]
fn a_cpp_program_starts_eight_std_threads_under_two_gib() {
    let source = r#"
#include <cstdio>
#include <thread>
#include <vector>
int main() {
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; i++) threads.emplace_back([] {});
    for (auto &t : threads) t.join();
    std::puts("ok");
}
"#;
    judged("cpp17", "threads.cpp", source, "", "ok\n", TWO_GIB_KIB, 5000).expect("AC", "8 std::threads under 2 GiB");
}

#[test]
fn a_python_program_starts_eight_threads_under_two_gib() {
    let source = "import threading\n\
        threads = [threading.Thread(target=lambda: None) for _ in range(8)]\n\
        for t in threads:\n    t.start()\n\
        for t in threads:\n    t.join()\n\
        print('ok')\n";
    judged("python3", "threads.py", source, "", "ok\n", TWO_GIB_KIB, 5000).expect("AC", "8 Python threads under 2 GiB");
}

#[test]
fn a_c_program_recurses_a_gib_deep_on_its_main_thread_under_two_gib() {
    // A million frames of a little over 1 KiB: the stack grows past 1 GiB.
    let source = r#"
#include <stdio.h>
static long down(long n) {
    volatile char frame[1024];
    frame[0] = (char)n;
    if (n == 0) return 0;
    return down(n - 1) + frame[0];
}
int main(void) { printf("%ld\n", down(1000000) * 0); return 0; }
"#;
    // Touching a GiB of stack takes seconds of system time on a busy machine.
    judged("c11", "deep.c", source, "", "0\n", TWO_GIB_KIB, 20000).expect("AC", "1 GiB of recursion under 2 GiB");
}

#[test]
fn a_recursion_deeper_than_the_memory_limit_is_stopped() {
    let source = r#"
#include <stdio.h>
static long down(long n) { volatile char frame[1024]; frame[0] = (char)n; return down(n + 1) + frame[0]; }
int main(void) { printf("%ld\n", down(0)); return 0; }
"#;
    let got = judged("c11", "endless.c", source, "", "", 64 << 10, 5000);
    assert!(["MLE", "RE"].contains(&got.status()), "an endless recursion: {}", got.0);
}

/// A+B in Java, its public class and package as given.
fn java_ab(package: &str, class: &str) -> String {
    format!(
        "{package}\nimport java.util.Scanner;\n\n\
         public class {class} {{\n    public static void main(String[] args) {{\n        \
         Scanner in = new Scanner(System.in);\n        System.out.println(in.nextLong() + in.nextLong());\n    }}\n}}\n"
    )
}

#[test]
fn java_runs_the_public_class_that_declares_main_whatever_its_name() {
    judged("java", "Solution.java", &java_ab("", "Solution"), "1 2\n", "3\n", 256 << 10, 5000)
        .expect("AC", "public class Solution");
}

#[test]
fn java_runs_a_public_class_in_a_package() {
    let source = java_ab("package contest.round1;", "Solver");
    judged("java", "Solver.java", &source, "1 2\n", "3\n", 256 << 10, 5000).expect("AC", "contest.round1.Solver");
}

#[test]
fn java_is_not_fooled_by_classes_in_comments_and_strings() {
    let source = r#"
import java.util.Scanner; // public class Decoy { public static void main(String[] a) {} }

/* public class Other {
       public static void main(String[] a) {} } */
class Helper { static String text = "public class Fake { public static void main(String[] a) {} }"; static char brace = '{'; }

public class Answer {
    static String nested = "}";
    public static void main(String... args) {
        Scanner in = new Scanner(System.in);
        System.out.println(in.nextLong() + in.nextLong() + Helper.text.length() * 0);
    }
}
"#;
    judged("java", "Answer.java", source, "1 2\n", "3\n", 256 << 10, 5000).expect("AC", "public class Answer");
}

#[test]
fn java_main_keeps_working_public_or_not() {
    judged("java", "Main.java", &java_ab("", "Main"), "1 2\n", "3\n", 256 << 10, 5000).expect("AC", "public Main");
    let package_private = java_ab("", "Main").replacen("public class", "class", 1);
    judged("java", "Main.java", &package_private, "1 2\n", "3\n", 256 << 10, 5000).expect("AC", "class Main");
}

#[test]
fn java_without_a_class_declaring_main_is_ce_saying_so() {
    let source = "public class Solution {\n    static void solve() {}\n}\n";
    ce_saying("java", "Solution.java", source, "no main", &["public static void main"]);
}

#[test]
fn a_python_syntax_error_is_ce_with_pythons_message() {
    let source = "a, b = map(int, input().split())\nprint(a + b\n";
    ce_saying("python3", "ab.py", source, "an unclosed parenthesis", &["SyntaxError", "main.py"]);
}

/// `source` is CE (`why`), and the message the judge keeps says each of `says`.
fn ce_saying(lang: &str, file: &str, source: &str, why: &str, says: &[&str]) {
    let got = judged(lang, file, source, "1 2\n", "3\n", 256 << 10, 5000);
    got.expect("CE", why);
    for s in says {
        assert!(got.stderr().contains(s), "{why}: the message does not say {s:?}: {}", got.0);
    }
}

#[test]
fn a_python_error_at_run_time_is_still_re() {
    let source = "a, b = map(int, input().split())\nprint(a / 0)\n";
    judged("python3", "ab.py", source, "1 2\n", "3\n", 256 << 10, 5000).expect("RE", "a ZeroDivisionError");
    judged("python3", "ab.py", "print(sum(map(int, input().split())))\n", "1 2\n", "3\n", 256 << 10, 5000)
        .expect("AC", "A+B");
}

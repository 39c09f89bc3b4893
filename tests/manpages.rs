//! The man pages (`man/`) agree with the programs: every long option of
//! every program and subcommand is on its page, every page passes
//! `mandoc -Tlint`, has its sections, and lists the exit codes the program
//! uses. `mandoc` must be installed (Debian: `apt-get install mandoc`).

use ojrunner::config::exit::ExitCode;
use std::collections::BTreeSet;
use std::process::Command;
use testkit::*;

/// The programs; each is documented on `man/<program>.8`.
const PROGRAMS: [&str; 6] = ["claimd", "judge-exec", "reportd", "leased", "runnerd", "hubd"];

/// Every page in `man/`.
const PAGES: [&str; 9] = [
    "claimd.8",
    "judge-exec.8",
    "reportd.8",
    "leased.8",
    "runnerd.8",
    "hubd.8",
    "ojrunner-spool.5",
    "ojrunner-languages.5",
    "ojrunner.7",
];

/// The sections every program's page has.
const SECTIONS_8: [&str; 10] = [
    "NAME",
    "SYNOPSIS",
    "DESCRIPTION",
    "OPTIONS",
    "ENVIRONMENT",
    "SIGNALS",
    "EXIT STATUS",
    "FILES",
    "EXAMPLES",
    "SEE ALSO",
];

/// The sections every other page has.
const SECTIONS_5_7: [&str; 3] = ["NAME", "DESCRIPTION", "SEE ALSO"];

fn page(name: &str) -> String {
    let path = repo().join("man").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `<program> <words...> --help`.
fn help(program: &str, words: &[String]) -> String {
    let out = Command::new(bin(program)).args(words).arg("--help").output().expect("run a program");
    assert!(out.status.success(), "{program} {words:?} --help: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The lines of one `Heading:` block of clap's help.
fn block<'a>(help: &'a str, heading: &str) -> Vec<&'a str> {
    help.lines().skip_while(|l| *l != heading).skip(1).take_while(|l| !l.trim().is_empty()).collect()
}

/// The subcommands a help text lists, but clap's own `help`.
fn subcommands(help: &str) -> Vec<String> {
    block(help, "Commands:")
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .map(String::from)
        .collect()
}

/// The long options a help text lists, without their dashes:
/// `  -h, --help   Print help` gives `help`.
fn long_options(help: &str) -> Vec<String> {
    block(help, "Options:")
        .iter()
        .filter_map(|l| l.trim_start().split("  ").next())
        .flat_map(|spec| spec.split([',', ' ']))
        .filter_map(|w| w.strip_prefix("--"))
        .map(String::from)
        .collect()
}

/// Every way to call `program`: itself, then each subcommand, recursively.
fn invocations(program: &str) -> Vec<Vec<String>> {
    let mut all = vec![vec![]];
    let mut i = 0;
    while i < all.len() {
        let words = all[i].clone();
        for sub in subcommands(&help(program, &words)) {
            all.push([words.clone(), vec![sub]].concat());
        }
        i += 1;
    }
    all
}

/// Whether an mdoc page documents `--option`: `Fl -option`, not followed
/// by more of a longer option's name.
fn documents(page: &str, option: &str) -> bool {
    let needle = format!("Fl -{option}");
    page.match_indices(&needle).any(|(at, _)| {
        let next = page[at + needle.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// The `.Sh` headings of a page, in order.
fn sections(page: &str) -> Vec<String> {
    page.lines().filter_map(|l| l.strip_prefix(".Sh ")).map(|s| s.trim_matches('"').to_string()).collect()
}

/// The codes the section under `heading` (`.Sh EXIT STATUS`) lists as
/// `.It <code>`, up to the next `.Sh`.
fn exit_codes_listed(page: &str, heading: &str) -> BTreeSet<i32> {
    page.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.starts_with(".Sh "))
        .filter_map(|l| l.strip_prefix(".It "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn every_option_of_every_program_and_subcommand_is_on_its_page() {
    let mut missing = Vec::new();
    for program in PROGRAMS {
        let text = page(&format!("{program}.8"));
        for words in invocations(program) {
            for option in long_options(&help(program, &words)) {
                if !documents(&text, &option) {
                    let call = std::iter::once(program).chain(words.iter().map(String::as_str));
                    missing.push(format!("{} --{option}", call.collect::<Vec<_>>().join(" ")));
                }
            }
        }
    }
    assert!(missing.is_empty(), "options missing from their man page (as `Fl -option`):\n{}", missing.join("\n"));
}

#[test]
fn every_page_passes_mandoc_lint_without_warnings() {
    for name in PAGES {
        let path = repo().join("man").join(name);
        let out = match Command::new("mandoc").args(["-Tlint", "-W", "warning"]).arg(&path).output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                panic!("mandoc is not installed, so the man pages cannot be checked: apt-get install mandoc")
            }
            Err(e) => panic!("running mandoc: {e}"),
        };
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && said.is_empty(), "mandoc -Tlint -W warning {name}: {}\n{said}", out.status);
    }
}

#[test]
fn the_page_list_is_what_man_holds() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(repo().join("man"))
        .expect("man/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let listed: BTreeSet<String> = PAGES.iter().map(|p| p.to_string()).collect();
    assert_eq!(on_disk, listed, "man/ and PAGES differ: add the page to this test");
}

/// `apropos ojrunner` finds every page: whatis(1) indexes the `.Nd` line.
#[test]
fn every_pages_one_line_description_names_ojrunner() {
    let mut lacking = Vec::new();
    for name in PAGES {
        let text = page(name);
        let nd = text.lines().find_map(|l| l.strip_prefix(".Nd ")).unwrap_or_else(|| panic!("{name}: no .Nd"));
        if !nd.split(|c: char| !c.is_alphanumeric()).any(|w| w == "ojrunner") {
            lacking.push(format!("{name}: .Nd {nd}"));
        }
    }
    assert!(lacking.is_empty(), "pages whose .Nd lacks the word ojrunner:\n{}", lacking.join("\n"));
}

#[test]
fn every_page_has_its_sections() {
    for name in PAGES {
        let have = sections(&page(name));
        let want: &[&str] = if name.ends_with(".8") { &SECTIONS_8 } else { &SECTIONS_5_7 };
        let missing: Vec<&&str> = want.iter().filter(|s| !have.iter().any(|h| h == *s)).collect();
        assert!(missing.is_empty(), "{name}: no section {missing:?} (it has {have:?})");
    }
}

/// Each page's EXIT STATUS, and ojrunner(7)'s table, list every code of the one table,
/// [`ExitCode::ALL`] (linked, not read from source), and nothing else: a
/// code a program does not use is still listed, saying so, so that a code
/// means the same on every page.
#[test]
fn every_program_page_lists_exactly_the_shared_exit_codes() {
    let want: BTreeSet<i32> = ExitCode::ALL.iter().map(|c| c.code()).collect();
    let overview = exit_codes_listed(&page("ojrunner.7"), ".Ss Exit codes");
    assert_eq!(overview, want, "ojrunner.7: its Exit codes list is not ExitCode::ALL");
    for program in PROGRAMS {
        let listed = exit_codes_listed(&page(&format!("{program}.8")), ".Sh EXIT STATUS");
        let undocumented: Vec<&i32> = want.difference(&listed).collect();
        let unknown: Vec<&i32> = listed.difference(&want).collect();
        assert!(
            undocumented.is_empty() && unknown.is_empty(),
            "{program}.8: EXIT STATUS lists {listed:?}; ExitCode::ALL is {want:?}: \
             missing {undocumented:?}, not an ExitCode {unknown:?}"
        );
    }
}

#[test]
fn the_language_page_names_every_language_of_the_shipped_table() {
    let table: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("etc/languages.json")).unwrap()).unwrap();
    let text = page("ojrunner-languages.5");
    for lang in table["languages"].as_array().expect("a languages list") {
        for key in ["name", "source"] {
            let value = lang[key].as_str().unwrap();
            assert!(text.contains(value), "ojrunner-languages.5 does not mention {key} {value:?} of {lang}");
        }
    }
}

/// The parsers above, on clap's own layout.
#[test]
fn help_texts_are_read_as_clap_writes_them() {
    let help = "About\n\nUsage: x [OPTIONS] [COMMAND]\n\nCommands:\n  run   Run it\n  help  Print this\n\n\
                Options:\n      --spool <DIR>  The spool [default: /x]\n      --registration-token-file <FILE>  A file\n  \
                -h, --help     Print help\n";
    assert_eq!(subcommands(help), ["run"]);
    assert_eq!(long_options(help), ["spool", "registration-token-file", "help"]);
    let page = ".It Fl -registration-token-file Ar FILE\n";
    assert!(documents(page, "registration-token-file"));
    assert!(!documents(page, "registration-token"), "a longer option does not document a shorter one");
}

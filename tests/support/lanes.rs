//! Slot-uid lanes. A runner kills every process of its slot uids after each
//! run, so two runners that share a uid must never judge at once; `make
//! test` runs the suites of its second phase side by side
//! (`.config/nextest.toml`), so each of them takes a lane of its own: lane
//! `i` is the slot uids from `OJ_SLOT_UID_BASE` + 128 i (the Makefile picks
//! a base of 2048 uids per checkout), its checkers' and interactors' 1000
//! above, inside the checkout's range for lanes 0 to 7. The suites of the
//! first phase run one test at a time and take lane 0.
//!
//! A lane reaches a runner through [`crate::runner_env_at`], the environment
//! of every runner the suites start (nextest gives every suite the same
//! environment, so the lane cannot come from there).

/// The suites of `make test`'s second phase, in lane order: the ones that
/// mostly wait (on a hub, a drain, a supervisor), each in a test group of
/// its own in `.config/nextest.toml` (a test below checks that the two
/// agree). The last three start no sandbox: their lanes go unused.
pub const WAITING: [&str; 11] = [
    "restarts",
    "metrics",
    "faults",
    "chaos",
    "e2e",
    "manners",
    "supervision",
    "lossy_net",
    "hub_load",
    "hubd",
    "manpages",
];

/// How many slot uids one lane holds: more workers than a runner of the
/// suites starts, with room to spare.
pub const LANE_WIDTH: u32 = 128;

/// This suite's lane: its place in [`WAITING`], else 0.
pub fn lane() -> u32 {
    let suite = super::layout::suite();
    WAITING.iter().position(|w| *w == suite).map_or(0, |i| i as u32)
}

/// The first slot uid of this suite's runners: the process's own base
/// (`OJ_SLOT_UID_BASE`, else the library's default) and its lane.
pub fn slot_uid_base() -> u32 {
    ojrunner::judge::slot_uid_base() + lane() * LANE_WIDTH
}

#[cfg(test)]
mod tests {
    use super::WAITING;
    use std::collections::BTreeMap;

    /// The test groups of `.config/nextest.toml` (name, max-threads) and
    /// its overrides (the suite of a `binary_id(ojrunner-tests::…)` filter,
    /// or `all()`, and its group), as written there, one to a line.
    fn nextest_config() -> (BTreeMap<String, u32>, Vec<(String, String)>) {
        let text = std::fs::read_to_string(super::super::layout::repo().join(".config/nextest.toml")).unwrap();
        let quoted = |l: &str, key: &str| -> Option<String> {
            let rest = &l[l.find(key)? + key.len()..];
            let rest = rest.trim_start().strip_prefix('=')?.trim_start().strip_prefix('\'')?;
            Some(rest[..rest.find('\'')?].to_string())
        };
        let (mut groups, mut overrides, mut section) = (BTreeMap::new(), Vec::new(), String::new());
        for l in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
            if l.starts_with('[') {
                section = l.to_string();
            } else if section == "[test-groups]" && l.contains("max-threads") {
                let (name, rest) = l.split_once('=').unwrap();
                let n = rest.split("max-threads").nth(1).unwrap().trim_start_matches([' ', '=']);
                groups.insert(name.trim().to_string(), n.trim_end_matches([' ', '}']).parse().unwrap());
            } else if let (Some(filter), Some(group)) = (quoted(l, "filter"), quoted(l, "test-group")) {
                let suite = filter
                    .strip_prefix("binary_id(ojrunner-tests::")
                    .map_or(filter.clone(), |s| s.trim_end_matches(')').into());
                overrides.push((suite, group));
            }
        }
        (groups, overrides)
    }

    #[test]
    fn each_waiting_suite_has_its_own_group_and_every_other_test_is_timed_alone() {
        let (groups, overrides) = nextest_config();
        let waiting: Vec<String> = WAITING.iter().map(|s| s.to_string()).collect();
        let (last, named) = overrides.split_last().expect("overrides in .config/nextest.toml");
        assert_eq!(
            last,
            &("all()".to_string(), "timing".to_string()),
            "the last override puts every other test in timing"
        );
        assert_eq!(groups.get("timing"), Some(&1), "the timing group runs one test at a time");
        for (suite, group) in named {
            assert_eq!(suite, group, "{suite}'s tests are in a group named after it");
        }
        let named: Vec<String> = named.iter().map(|(s, _)| s.clone()).collect();
        assert_eq!(named, waiting, "the suites given groups of their own are the waiting ones, in lane order");
        let mut others: Vec<&String> = groups.keys().filter(|g| *g != "timing").collect();
        others.sort();
        let mut expect: Vec<&String> = waiting.iter().collect();
        expect.sort();
        assert_eq!(others, expect, "a test group for each waiting suite, and none else");
        for suite in WAITING {
            let file = super::super::layout::repo().join(format!("tests/{suite}.rs"));
            assert!(file.exists(), "{} (a waiting suite) is not there", file.display());
        }
    }
}

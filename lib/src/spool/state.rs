//! The claim state machine as data: the states ([`ClaimState`]) and every
//! move a claim makes ([`Transition`], [`MOVES`]: from which states, to
//! which). The spool's SQL takes its state names and its `state IN (…)`
//! guards from here and nowhere else, and ojrunner-spool(5) shows the same
//! table (a test holds the two together).

/// Where a claim is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClaimState {
    Claimed,
    Prepped,
    Started,
    Judged,
    Aborted,
    Reported,
    Discarded,
}

impl ClaimState {
    pub const ALL: [ClaimState; 7] = [
        ClaimState::Claimed,
        ClaimState::Prepped,
        ClaimState::Started,
        ClaimState::Judged,
        ClaimState::Aborted,
        ClaimState::Reported,
        ClaimState::Discarded,
    ];

    /// The states that hold a lease ([`ClaimState::holds_lease`]), in order.
    pub const HELD: [ClaimState; count(true)] = pick(true);

    /// The states a claim ends in: the others.
    pub const ENDED: [ClaimState; count(false)] = pick(false);

    /// The state's name, as the spool stores it: the only place it is
    /// written.
    pub const fn as_str(self) -> &'static str {
        match self {
            ClaimState::Claimed => "claimed",
            ClaimState::Prepped => "prepped",
            ClaimState::Started => "started",
            ClaimState::Judged => "judged",
            ClaimState::Aborted => "aborted",
            ClaimState::Reported => "reported",
            ClaimState::Discarded => "discarded",
        }
    }

    /// The state named `s`, if one is.
    pub fn parse(s: &str) -> Option<ClaimState> {
        ClaimState::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// States in which the runner still holds the job at the hub: its lease
    /// must be kept, and it counts against capacity.
    pub const fn holds_lease(self) -> bool {
        matches!(
            self,
            ClaimState::Claimed | ClaimState::Prepped | ClaimState::Started | ClaimState::Judged | ClaimState::Aborted
        )
    }
}

/// How many states hold a lease (`held`), or do not.
const fn count(held: bool) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < ClaimState::ALL.len() {
        if ClaimState::ALL[i].holds_lease() == held {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The states that hold a lease (`held`), or do not, in order.
const fn pick<const N: usize>(held: bool) -> [ClaimState; N] {
    let mut out = [ClaimState::Claimed; N];
    let (mut i, mut j) = (0, 0);
    while i < ClaimState::ALL.len() {
        if ClaimState::ALL[i].holds_lease() == held {
            out[j] = ClaimState::ALL[i];
            j += 1;
        }
        i += 1;
    }
    out
}

/// A move of a claim from one state to another; a claim is born
/// [`ClaimState::Claimed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Code and testdata are ready (claimd).
    Prep,
    /// Judging begins, unless a drain has (judge-exec).
    Start,
    /// Every case is judged; the `complete` is queued with it (judge-exec).
    Judge,
    /// Handed back before it started; its `abort` is queued with it
    /// (claimd, the drain's scan).
    Abort,
    /// The hub refused the `complete`: `abort(rejected)` instead (reportd).
    Reject,
    /// The hub answered the outcome finally (reportd).
    Report,
    /// Ended unreported: superseded, lease lost, identity gone,
    /// undeliverable; its outcome and events deleted with it.
    Discard,
}

/// One row of the state machine: `transition` moves a claim in one of
/// `from` to `to`, and a claim anywhere else is left as it is.
#[derive(Clone, Copy, Debug)]
pub struct Move {
    pub transition: Transition,
    pub from: &'static [ClaimState],
    pub to: ClaimState,
}

use ClaimState::{Aborted, Claimed, Discarded, Judged, Prepped, Reported, Started};

/// The state machine: every move the spool makes, in [`Transition`]'s
/// order.
pub const MOVES: [Move; 7] = [
    Move { transition: Transition::Prep, from: &[Claimed], to: Prepped },
    Move { transition: Transition::Start, from: &[Prepped], to: Started },
    Move { transition: Transition::Judge, from: &[Started], to: Judged },
    Move { transition: Transition::Abort, from: &[Claimed, Prepped], to: Aborted },
    Move { transition: Transition::Reject, from: &[Judged], to: Aborted },
    Move { transition: Transition::Report, from: &[Judged, Aborted], to: Reported },
    Move { transition: Transition::Discard, from: &ClaimState::HELD, to: Discarded },
];

// Each move stands at its transition's place, so looking one up is an index.
const _: () = {
    let mut i = 0;
    while i < MOVES.len() {
        assert!(MOVES[i].transition as usize == i);
        i += 1;
    }
};

impl Transition {
    pub const ALL: [Transition; 7] = [
        Transition::Prep,
        Transition::Start,
        Transition::Judge,
        Transition::Abort,
        Transition::Reject,
        Transition::Report,
        Transition::Discard,
    ];

    /// Its row of [`MOVES`].
    pub const fn rule(self) -> Move {
        MOVES[self as usize]
    }

    /// The states it moves a claim from.
    pub const fn from(self) -> &'static [ClaimState] {
        self.rule().from
    }

    /// The state it moves a claim to.
    pub const fn to(self) -> ClaimState {
        self.rule().to
    }

    /// Its name in ojrunner-spool(5).
    pub const fn name(self) -> &'static str {
        match self {
            Transition::Prep => "prep",
            Transition::Start => "start",
            Transition::Judge => "judge",
            Transition::Abort => "abort",
            Transition::Reject => "reject",
            Transition::Report => "report",
            Transition::Discard => "discard",
        }
    }
}

/// `('a','b')`: the SQL list of `states`, for `state IN …`.
pub(super) fn sql_list(states: &[ClaimState]) -> String {
    let names: Vec<String> = states.iter().map(|s| format!("'{}'", s.as_str())).collect();
    format!("({})", names.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table as ojrunner-spool(5) lists it: one `.It` line a move.
    fn man_rows() -> Vec<String> {
        MOVES
            .iter()
            .map(|m| {
                let from: Vec<&str> = m.from.iter().map(|s| s.as_str()).collect();
                format!(".It Li {} Ta Li {} Ta Li {}", m.transition.name(), from.join(" , "), m.to.as_str())
            })
            .collect()
    }

    #[test]
    fn the_man_page_shows_the_table_the_spool_runs() {
        let page = include_str!("../../../man/ojrunner-spool.5");
        let shown: Vec<String> = page
            .lines()
            .skip_while(|l| *l != ".It Sy move Ta Sy from Ta Sy to")
            .skip(1)
            .take_while(|l| *l != ".El")
            .map(str::to_string)
            .collect();
        assert_eq!(shown, man_rows(), "ojrunner-spool(5)'s table of moves is not the spool's (state.rs MOVES)");
    }

    #[test]
    fn the_table_is_a_state_machine_of_the_documented_shape() {
        for m in MOVES {
            assert!(!m.from.is_empty() && !m.from.contains(&m.to), "{:?} moves somewhere else", m.transition);
            assert!(m.from.iter().all(|s| s.holds_lease()), "{:?} moves a claim that ended", m.transition);
        }
        // Every state is reached (or is the first), and the ended ones are left by nothing.
        for s in ClaimState::ALL {
            assert!(s == Claimed || MOVES.iter().any(|m| m.to == s), "{s:?} unreachable");
            assert_eq!(MOVES.iter().any(|m| m.from.contains(&s)), s.holds_lease(), "{s:?}");
        }
        assert_eq!(ClaimState::HELD, [Claimed, Prepped, Started, Judged, Aborted]);
        assert_eq!(ClaimState::ENDED, [Reported, Discarded]);
        assert_eq!(sql_list(&ClaimState::ENDED), "('reported','discarded')");
        for s in ClaimState::ALL {
            assert_eq!(ClaimState::parse(s.as_str()), Some(s));
        }
    }

    /// State names are written once, here: no other file of the library
    /// spells one as a string (`'claimed'`, `"claimed"`), so every SQL
    /// guard and every state written comes from [`ClaimState`] and
    /// [`MOVES`], and no file but `claims.rs` sets a claim's state.
    #[test]
    fn no_other_file_of_the_library_spells_a_state_or_moves_a_claim() {
        fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    files(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut all = Vec::new();
        files(&src, &mut all);
        assert!(all.len() > 20, "{} files under {}", all.len(), src.display());
        let mut setters = Vec::new();
        for p in all {
            let text = std::fs::read_to_string(&p).unwrap();
            let name = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            if name == "spool/state.rs" {
                continue;
            }
            for s in ClaimState::ALL {
                for q in ['\'', '"'] {
                    let spelt = format!("{q}{}{q}", s.as_str());
                    assert!(!text.contains(&spelt), "{name} spells {spelt}: take it from ClaimState");
                }
            }
            // The spool's tests put a claim in each state to try every move.
            let n = text.matches("SET state").count();
            if n > 0 && name != "spool/tests.rs" {
                setters.push((name, n));
            }
        }
        assert_eq!(setters, [("spool/claims.rs".to_string(), 1)], "one UPDATE moves a claim: claims.rs's move_in");
    }
}

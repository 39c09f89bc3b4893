//! The runner's metrics, in the Prometheus text format (version 0.0.4),
//! read from the spool: `runnerd metrics` prints them, `runnerd
//! --metrics-listen` serves them ([`crate::scrape`]).
//!
//! Every counter lives in the spool's `counters` table and is bumped by the
//! stage that sees its event, in the transaction that records the event
//! where there is one ([`crate::spool`]): so a counter is the same whichever
//! process reads it, never goes back across restarts or pruning, and the
//! metrics read the same while the runner runs and once it has stopped.
//! Gauges (the outbox, the claims by state) are read from the spool's rows
//! when the metrics are rendered. `ojrunner_build_info` is the rendering
//! program's; the process metrics are added by the server alone
//! ([`crate::scrape`]): `runnerd metrics`' own process is not the runner's.

use crate::answer::{Answer, HttpReply, HubCall};
use crate::counter::{labels, phase_series, Counter};
use crate::hub::{FetchError, Reach};
use crate::phase::{self, Phase, BUCKETS_US};
use crate::spool::{self, now_ms, Spool};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The name of a call, as `ojrunner_hub_errors_total` labels it.
pub fn call_name(call: HubCall) -> &'static str {
    match call {
        HubCall::Register => "register",
        HubCall::Heartbeat => "heartbeat",
        HubCall::NextJob => "next_job",
        HubCall::CancelPoll => "cancel_poll",
        HubCall::Complete => "complete",
        HubCall::Abort => "abort",
        HubCall::Events => "events",
        HubCall::Testdata => "testdata",
        HubCall::Code => "code",
    }
}

/// What kind of error an answer is, if it is not the call's success.
pub fn error_kind(answer: &Answer) -> Option<&'static str> {
    Some(match answer {
        Answer::Done { .. } | Answer::NoWork => return None,
        Answer::Unauthorized(_) => "unauthorized",
        Answer::NotHeld(_) => "not_held",
        Answer::Refused(_) => "refused",
        Answer::NotServed(_) => "not_served",
        Answer::Garbled { .. } => "garbled",
        Answer::NoWord(HttpReply::Unreachable(_)) => "unreachable",
        Answer::NoWord(HttpReply::Status(c, _) | HttpReply::Unreadable(c, ..)) => match c {
            300..=399 => "http_3xx",
            400..=499 => "http_4xx",
            500..=599 => "http_5xx",
            _ => "http_other",
        },
    })
}

/// Counts `answer` to `call` in `ojrunner_hub_errors_total` if it is an
/// error. Best effort: a spool that cannot count it (a full disk) costs
/// the count, never the stage.
pub fn count_hub_answer(spool: &mut Spool, call: HubCall, answer: &Answer) {
    if let Some(kind) = error_kind(answer) {
        count(spool, Counter::HubErrors, &labels(&[("call", call_name(call)), ("kind", kind)]));
    }
}

/// Counts a download (code, testdata) that failed by the hub's doing, as
/// call `download`; the runner's own failures are not the hub's errors.
pub fn count_fetch_error(spool: &mut Spool, e: &FetchError) {
    let kind = match e.1 {
        Reach::Answered => "answered_no",
        Reach::Away => "unreachable",
        Reach::Refused => "unauthorized",
        Reach::Unusable => "unusable",
        Reach::Ours => return,
    };
    count(spool, Counter::HubErrors, &labels(&[("call", "download"), ("kind", kind)]));
}

/// Adds one to `counter`, best effort (see [`count_hub_answer`]).
pub fn count(spool: &mut Spool, counter: Counter, labels: &str) {
    if let Err(e) = spool.bump(counter, labels, 1) {
        log::debug!("{e}");
    }
}

/// The metrics of the runner whose spool is `spool`, in the Prometheus
/// text format.
pub fn render(spool: &Spool) -> spool::Result<String> {
    let counters = spool.counters()?;
    let mut out = String::new();
    for c in Counter::EXPORTED {
        let name = c.name();
        let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} counter", c.help());
        // The known label sets, at 0 until counted, then any other counted.
        let mut series: BTreeMap<String, i64> = c.known().into_iter().map(|l| (l, 0)).collect();
        for (_, l, v) in counters.iter().filter(|(n, _, _)| n == name) {
            series.insert(l.clone(), *v);
        }
        for (l, v) in series {
            let _ = writeln!(out, "{name}{} {v}", braced(&l));
        }
    }
    render_histograms(&mut out, &counters);
    render_gauges(&mut out, spool)?;
    out.push_str(&ojrunner_daemon::process::build_info("ojrunner", "the runner", env!("CARGO_PKG_VERSION")));
    Ok(out)
}

/// `{labels}`, or nothing for none.
fn braced(labels: &str) -> String {
    if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    }
}

/// `ojrunner_phase_seconds`: the spool's per-bucket counts, cumulated.
fn render_histograms(out: &mut String, counters: &[(String, String, i64)]) {
    let name = "ojrunner_phase_seconds";
    let _ = writeln!(out, "# HELP {name} How long each phase of a claim took (ojrunner-spool(5), phases).");
    let _ = writeln!(out, "# TYPE {name} histogram");
    // series -> (per-bucket counts, sum in µs)
    let mut series: BTreeMap<&str, (Vec<i64>, i64)> = BTreeMap::new();
    let empty = || (vec![0; BUCKETS_US.len() + 1], 0);
    let les: Vec<String> = (0..=BUCKETS_US.len()).map(phase::le).collect();
    // Every phase and label value, at 0 until timed.
    let known: Vec<String> = Phase::ALL
        .iter()
        .flat_map(|&p| p.label().map_or(&[""][..], |(_, values)| values).iter().map(move |v| phase_series(p, v)))
        .collect();
    for s in &known {
        series.insert(s, empty());
    }
    for (n, l, v) in counters {
        if n == Counter::PhaseBucket.name() {
            let Some((s, le)) = l.rsplit_once(",le=\"") else { continue };
            let le = le.trim_end_matches('"');
            let Some(i) = les.iter().position(|l| l == le) else { continue };
            series.entry(s).or_insert_with(empty).0[i] += v;
        } else if n == Counter::PhaseSumMicros.name() {
            series.entry(l.as_str()).or_insert_with(empty).1 += v;
        }
    }
    for (s, (buckets, sum)) in series {
        let mut total = 0;
        for (i, n) in buckets.iter().enumerate() {
            total += n;
            let _ = writeln!(out, "{name}_bucket{{{s},le=\"{}\"}} {total}", les[i]);
        }
        let _ = writeln!(out, "{name}_sum{{{s}}} {}", phase::seconds(sum));
        let _ = writeln!(out, "{name}_count{{{s}}} {total}");
    }
}

fn render_gauges(out: &mut String, spool: &Spool) -> spool::Result<()> {
    let mut gauge = |name: &str, help: &str, lines: Vec<(String, String)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (l, v) in lines {
            let _ = writeln!(out, "{name}{} {v}", braced(&l));
        }
    };
    let counts = spool.counts()?;
    let states = crate::spool::ClaimState::ALL
        .iter()
        .map(|s| (labels(&[("state", s.as_str())]), counts.get(s.as_str()).copied().unwrap_or(0).to_string()))
        .collect();
    gauge("ojrunner_claims", "Claims in the spool, by state.", states);
    let now = now_ms();
    let (depth, _) = spool.outbox_len()?;
    gauge("ojrunner_outbox_depth", "Outcomes owed to the hub.", vec![(String::new(), depth.to_string())]);
    let age = spool.outbox_oldest()?.map(|t| (now - t).max(0) * 1000).unwrap_or(0);
    gauge(
        "ojrunner_outbox_oldest_age_seconds",
        "How long the oldest outcome owed has waited (0 if none).",
        vec![(String::new(), phase::seconds(age))],
    );
    gauge(
        "ojrunner_dead_outcomes",
        "Outcomes given up on, kept for an operator.",
        vec![(String::new(), spool.dead_count()?.to_string())],
    );
    gauge(
        "ojrunner_draining",
        "1 while the drain latch is set.",
        vec![(String::new(), u8::from(spool.draining()?).to_string())],
    );
    let beat = spool.last_beat()?;
    if beat > 0 {
        gauge(
            "ojrunner_last_beat_age_seconds",
            "How long ago a heartbeat was last attempted.",
            vec![(String::new(), phase::seconds((now - beat).max(0) * 1000))],
        );
    }
    Ok(())
}

/// Recent percentiles per phase, for `runnerd status`: the last
/// [`phase::RECENT`] timings of each phase (and label), p50 and p99 in ms.
pub fn recent_phases(spool: &Spool) -> spool::Result<serde_json::Value> {
    let mut phases = serde_json::Map::new();
    for p in Phase::ALL {
        let labels: &[&str] = p.label().map(|(_, values)| values).unwrap_or(&[""]);
        for &label in labels {
            let mut took = spool.recent_timings(p, label, phase::RECENT)?;
            if took.is_empty() {
                continue;
            }
            let ms = |us: Option<i64>| us.map(|us| us as f64 / 1000.0);
            let key = if label.is_empty() { p.as_str().to_string() } else { format!("{}:{label}", p.as_str()) };
            let n = took.len();
            let (p50, p99) = (phase::percentile(&mut took, 50.0), phase::percentile(&mut took, 99.0));
            phases.insert(key, serde_json::json!({"n": n, "p50_ms": ms(p50), "p99_ms": ms(p99)}));
        }
    }
    Ok(serde_json::Value::Object(phases))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_rendered_cumulative_with_its_sum_and_count() {
        let s = phase_series(Phase::Compile, "");
        let bucket = |us: i64| format!("{s},le=\"{}\"", phase::le(phase::bucket_of(us)));
        let rows = vec![
            (Counter::PhaseBucket.name().to_string(), bucket(400), 2),
            (Counter::PhaseBucket.name().to_string(), bucket(3_000), 1),
            (Counter::PhaseBucket.name().to_string(), bucket(i64::MAX), 1),
            (Counter::PhaseSumMicros.name().to_string(), s.clone(), 1_503_800),
        ];
        let mut out = String::new();
        render_histograms(&mut out, &rows);
        let line = |le: &str| format!("ojrunner_phase_seconds_bucket{{phase=\"compile\",le=\"{le}\"}} ");
        let value = |le: &str| -> i64 {
            let l = out.lines().find(|l| l.starts_with(&line(le))).unwrap_or_else(|| panic!("no le {le}:\n{out}"));
            l.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert_eq!(value("0.0005"), 2);
        assert_eq!(value("0.001"), 2, "cumulative: a bucket counts every smaller one");
        assert_eq!(value("0.005"), 3);
        assert_eq!(value("1800"), 3);
        assert_eq!(value("+Inf"), 4);
        assert!(out.contains("ojrunner_phase_seconds_sum{phase=\"compile\"} 1.5038\n"), "{out}");
        assert!(out.contains("ojrunner_phase_seconds_count{phase=\"compile\"} 4\n"), "{out}");
    }

    /// The pairs shown at 0 are every pair an answer can be counted as.
    #[test]
    fn every_error_an_answer_can_be_counted_as_is_known_in_advance() {
        use crate::counter::HUB_ERRORS;
        // Testdata and code are counted as `download`, by their own rule.
        let calls = HubCall::ALL.into_iter().filter(|c| !matches!(c, HubCall::Testdata | HubCall::Code));
        let mut met = std::collections::BTreeSet::new();
        for call in calls {
            let known = HUB_ERRORS.iter().find(|(c, _)| *c == call_name(call)).expect("a known call").1;
            let mut replies = vec![HttpReply::Unreachable("refused".into())];
            for code in 100..600 {
                for body in ["", "{\"error\": \"x\"}", "<html>proxy</html>"] {
                    replies.push(HttpReply::Status(code, body.into()));
                }
            }
            for reply in replies {
                if let Some(kind) = error_kind(&Answer::of(call, reply)) {
                    assert!(known.contains(&kind), "{} can meet {kind}", call_name(call));
                    met.insert((call_name(call), kind));
                }
            }
            for kind in known {
                assert!(met.contains(&(call_name(call), *kind)), "{} never meets {kind}", call_name(call));
            }
        }
    }

    #[test]
    fn a_fresh_spool_shows_every_known_series_at_0() {
        let spool = Spool::create(&ojrunner_daemon::test_dir("metrics-zeros")).unwrap();
        let out = render(&spool).unwrap();
        for line in [
            "ojrunner_jobs_claimed_total 0\n",
            "ojrunner_jobs_reported_total{outcome=\"complete\"} 0\n",
            "ojrunner_jobs_aborted_total{reason=\"drain\"} 0\n",
            "ojrunner_jobs_discarded_total{reason=\"undeliverable\"} 0\n",
            "ojrunner_case_verdicts_total{verdict=\"OLE\"} 0\n",
            "ojrunner_hub_errors_total{call=\"abort\",kind=\"garbled\"} 0\n",
            "ojrunner_hub_errors_total{call=\"download\",kind=\"answered_no\"} 0\n",
            "ojrunner_phase_seconds_bucket{phase=\"report\",outcome=\"abort\",le=\"+Inf\"} 0\n",
            "ojrunner_phase_seconds_sum{phase=\"judge\"} 0\n",
            "ojrunner_phase_seconds_count{phase=\"testdata\",cache=\"hit\"} 0\n",
        ] {
            assert!(out.contains(line), "no {line}in:\n{out}");
        }
    }

    #[test]
    fn an_answer_that_is_not_the_calls_success_is_an_error_of_its_kind() {
        assert_eq!(error_kind(&Answer::NoWork), None);
        assert_eq!(error_kind(&Answer::Done { status: 204, body: String::new() }), None);
        assert_eq!(error_kind(&Answer::NoWord(HttpReply::Status(503, String::new()))), Some("http_5xx"));
        assert_eq!(error_kind(&Answer::NoWord(HttpReply::Unreachable("refused".into()))), Some("unreachable"));
        assert_eq!(error_kind(&Answer::Unauthorized(HttpReply::Status(401, String::new()))), Some("unauthorized"));
    }
}

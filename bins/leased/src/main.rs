//! `leased`: heartbeats for every job the runner holds. Its command line is the common options alone; the
//! work is `ojrunner::stage::leased::run`.

fn main() {
    ojrunner::daemon::common_stage_main(
        "leased",
        "Keep the leases of the jobs the runner holds",
        ojrunner::stage::leased::run,
    );
}

//! `reportd`: delivers outcomes and events to the hub. Its command line is the common options alone; the
//! work is `ojrunner::stage::reportd::run`.

fn main() {
    ojrunner::daemon::common_stage_main(
        "reportd",
        "Deliver outcomes and progress events to the hub",
        ojrunner::stage::reportd::run,
    );
}

fn main() {
    ojrunner::config::keep_inherited_fds_private();
    std::process::exit(ojrunner::stage::judge_exec::main().code());
}

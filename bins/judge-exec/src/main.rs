fn main() {
    std::process::exit(ojrunner::stage::judge_exec::main());
}

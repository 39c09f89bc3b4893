fn main() {
    std::process::exit(ojrunner::stage::reportd::main());
}

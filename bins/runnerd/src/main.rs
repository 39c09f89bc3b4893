fn main() {
    std::process::exit(ojrunner::stage::runnerd::main());
}

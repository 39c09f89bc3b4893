fn main() {
    std::process::exit(ojrunner::stage::claimd::main());
}

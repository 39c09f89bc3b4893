fn main() {
    std::process::exit(ojrunner::stage::leased::main());
}

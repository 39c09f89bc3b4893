fn main() {
    std::process::exit(ojrunner::stage::hubd::main());
}

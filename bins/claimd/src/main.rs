fn main() {
    ojrunner::config::keep_inherited_fds_private();
    std::process::exit(ojrunner::stage::claimd::main().code());
}

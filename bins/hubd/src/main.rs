fn main() {
    ojrunner_daemon::fds::keep_inherited_fds_private();
    std::process::exit(ojrunner_hub::cli::main().code());
}

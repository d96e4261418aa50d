fn main() -> std::process::ExitCode {
    executor::cli::main()
}

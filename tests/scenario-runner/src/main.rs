//! `carpentry-scenario-runner FILE`: one scenario file in, one JSON document of every decision out
//! (see the library). Built for wasm32-wasip1 and run inside wasmtime by the parity test.

use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut stdout = std::io::stdout().lock();
    let code = carpentry_scenario_runner::main_with(&args, &mut stdout);
    if stdout.flush().is_err() {
        return ExitCode::FAILURE;
    }
    ExitCode::from(code)
}

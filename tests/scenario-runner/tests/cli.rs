//! The runner as the parity test runs it natively: a child process, one file argument, one JSON
//! document on standard output, exit 0 for a scenario that ran and 1 for anything else. (Cargo
//! also builds the runner's binary for these tests, in the profile they are built with, which is
//! where the parity test finds it.)

use std::path::Path;
use std::process::Command;

fn run(args: &[&str]) -> (i32, serde_json::Value) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_carpentry-scenario-runner")).args(args).output().expect("the runner starts");
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().expect("an exit code"), doc)
}

#[test]
fn a_scenario_file_gives_its_run_and_exit_0() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/p01-one-pod.yaml");
    let (code, doc) = run(&[file.to_str().expect("a UTF-8 path")]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["kind"], "ScenarioRun");
    assert_eq!(doc["scenario"], "p01-one-pod.yaml", "the file name, not the path");
    assert!(doc["round"]["results"].is_object(), "{doc}");
}

#[test]
fn a_missing_file_or_no_argument_is_an_error_document_and_exit_1() {
    let (code, doc) = run(&["/nonexistent/dir/none.yaml"]);
    assert_eq!(code, 1);
    assert_eq!(doc["kind"], "ScenarioRunError");
    assert_eq!(doc["scenario"], "none.yaml");
    assert!(doc["error"].as_str().is_some_and(|e| e.contains("/nonexistent/dir/none.yaml")), "{doc}");

    let (code, doc) = run(&[]);
    assert_eq!(code, 1);
    assert!(doc["error"].as_str().is_some_and(|e| e.starts_with("usage:")), "{doc}");
}

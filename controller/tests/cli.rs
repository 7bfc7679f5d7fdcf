//! The controller binary's start-up as an operator meets it: settings that are missing or
//! contradictory stop it at once with a message naming what to set, and an API server that never
//! answers stops it within the request timeout instead of hanging.
//!
//! Real: the binary, the AWS SDK's region chain (environment, profile files), kube's client over
//! TCP. Injected: an empty HOME and profile paths of the test's own, and instance metadata switched
//! off (`AWS_EC2_METADATA_DISABLED`), so the chain can only find what the test gives it and the
//! test sends nothing off this machine; an "API server" that accepts connections and never answers.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn controller(home: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_carpentry-controller"));
    cmd.args(["--cloud-provider", "aws", "--cluster-name", "demo", "--kubeconfig"])
        .arg(home.join("no-kubeconfig"))
        .env("HOME", home)
        .env("AWS_CONFIG_FILE", home.join("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", home.join("no-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for var in ["AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "CLUSTER_NAME", "KUBECONFIG"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied()).output().expect("run carpentry-controller")
}

#[test]
fn the_aws_provider_takes_its_region_from_the_sdk_chain_and_names_the_settings_when_there_is_none() {
    let home = std::env::temp_dir().join(format!("carpentry-cli-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    // Nothing names a region: no silent us-east-1, an error saying how to set one.
    let out = controller(&home, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("no AWS region") && stderr.contains("settings.region"), "{stderr}");
    // The chain's environment variable, and a profile's region, are taken: start-up goes on to
    // the (missing) kubeconfig.
    let config = home.join("config");
    std::fs::write(&config, "[default]\nregion = eu-west-1\n").unwrap();
    for env in [vec![("AWS_DEFAULT_REGION", "us-west-2")], vec![("AWS_CONFIG_FILE", config.to_str().unwrap())]] {
        let out = controller(&home, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(!stderr.contains("no AWS region"), "{env:?}: {stderr}");
        assert!(stderr.contains("no-kubeconfig"), "{env:?}: the next step fails on the kubeconfig: {stderr}");
    }
    std::fs::remove_dir_all(&home).unwrap();
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn an_api_server_that_never_answers_stops_start_up_instead_of_hanging() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    // Accepts every connection and holds it open, reading nothing and answering nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming() {
            held.push(stream);
        }
    });
    let dir = std::env::temp_dir().join(format!("carpentry-cli-silent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n\
             users: [{{name: u, user: {{}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_carpentry-controller"))
        .args(["--cloud-provider", "kwok", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--health-port", &free_port().to_string(), "--metrics-port", &free_port().to_string()])
        .env("HOME", &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run carpentry-controller");
    // A guard against a hang, far above the 30 s request timeout (not a timing assertion).
    let deadline = Instant::now() + Duration::from_secs(150);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("start-up hung on an API server that never answers:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!status.success(), "{stderr}");
    // The first call start-up waits on is the leader election's Lease.
    assert!(stderr.contains("leader election: cannot use Lease"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

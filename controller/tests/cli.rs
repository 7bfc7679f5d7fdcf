//! The controller binary's start-up as an operator meets it: settings that are missing or
//! contradictory stop it at once with a message naming what to set.
//!
//! Real: the binary and the AWS SDK's region chain (environment, profile files). Injected: an
//! empty HOME and profile paths of the test's own, and instance metadata switched off
//! (`AWS_EC2_METADATA_DISABLED`), so the chain can only find what the test gives it and the test
//! sends nothing off this machine.

use std::process::{Command, Output};

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

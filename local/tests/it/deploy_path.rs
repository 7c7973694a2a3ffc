//! The deploy path: `scripts/deploy.sh` (what `make deploy-build` and `make deploy` run, and what
//! `docs/deploy.md`, "Deploying by hand", says) installs the arm64 Rust target once, before the parallel
//! `sam build`, and the deploy pipeline's workflows hold to their rules (pinned actions, OIDC, the
//! stages in order from one build). actionlint checks the workflows' syntax in `make test`; these
//! check what it does not.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn read(path: &str) -> String {
    fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// `scripts/deploy.sh build` in a copy of the repository's scripts where rustup and the SAM CLI
/// are stand-ins that log their calls to `calls` (rustup keeps its installed targets in a file,
/// starting with `installed`; sam fails unless the arm64 target is installed when it runs, as
/// the real parallel build then would). The log.
fn deploy_build(dir: &Path, installed: &[&str]) -> String {
    fs::create_dir_all(dir.join("scripts")).unwrap();
    fs::copy(
        repo().join("scripts/deploy.sh"),
        dir.join("scripts/deploy.sh"),
    )
    .unwrap();
    executable(
        &dir.join("scripts/venv.sh"),
        "#!/bin/sh\necho venv >> \"$CALLS\"\n",
    );
    fs::write(dir.join("targets"), installed.join("\n") + "\n").unwrap();
    executable(
        &dir.join("bin/rustup"),
        r#"#!/bin/sh
echo "rustup $*" >> "$CALLS"
case "$1 $2" in
  "target list") cat "$TARGETS" ;;
  "target add") echo "$3" >> "$TARGETS" ;;
esac
"#,
    );
    executable(
        &dir.join(".venv/bin/sam"),
        r#"#!/bin/sh
echo "sam $*" >> "$CALLS"
grep -qx aarch64-unknown-linux-gnu "$TARGETS" || { echo "Failed to install target component" >&2; exit 1; }
"#,
    );
    let out = Command::new("bash")
        .arg(dir.join("scripts/deploy.sh"))
        .arg("build")
        .env("CALLS", dir.join("calls"))
        .env("TARGETS", dir.join("targets"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", dir.join("bin").display()),
        )
        .output()
        .expect("runs scripts/deploy.sh");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    fs::read_to_string(dir.join("calls")).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rhythm-deploy-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

#[test]
fn deploy_build_installs_the_arm64_target_once_before_the_parallel_sam_build() {
    let fresh = scratch("fresh");
    let calls = deploy_build(&fresh, &["x86_64-unknown-linux-gnu"]);
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            "venv",
            "rustup target list --installed",
            "rustup target add aarch64-unknown-linux-gnu",
            "sam build",
        ],
        "{calls}"
    );
    // Installed already: nothing is added, the build runs.
    let again = scratch("again");
    let calls = deploy_build(
        &again,
        &["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"],
    );
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        ["venv", "rustup target list --installed", "sam build"],
        "{calls}"
    );
    let _ = fs::remove_dir_all(fresh);
    let _ = fs::remove_dir_all(again);
}

#[test]
fn the_deploying_guide_deploys_with_the_make_targets_that_run_the_deploy_script() {
    let makefile = read("Makefile");
    assert!(makefile.contains("deploy-build:\n\t@scripts/deploy.sh build\n"));
    assert!(makefile.contains("deploy:\n\t@scripts/deploy.sh deploy \"$(ENV)\"\n"));
    let guide = read("docs/deploy.md");
    let section = &guide[guide
        .find("## Deploying by hand")
        .expect("the deploying section")..];
    let section = &section[..section.find("\n## ").expect("the next section")];
    for command in [
        "make deploy-build",
        "make deploy ENV=dev",
        "scripts/smoke.sh --api",
    ] {
        assert!(
            section.contains(command),
            "docs/deploy.md, by hand: {command}"
        );
    }
    // The command that fails on a fresh machine is not offered any more.
    assert!(!section.contains("sam build && sam deploy"));
    for what in [
        "OperatorJwtIssuer",
        "OperatorJwtAudience",
        "NotificationSenderAddress",
        "AlarmTopicArn",
    ] {
        assert!(
            section.contains(what),
            "docs/deploy.md, by hand, says {what}"
        );
    }
}

/// Every `uses:` of the workflows: (file, the action reference, the rest of its line).
fn uses() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(repo().join(".github/workflows")).expect(".github/workflows") {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for line in text.lines() {
            let Some(rest) = line
                .trim_start()
                .trim_start_matches("- ")
                .strip_prefix("uses: ")
            else {
                continue;
            };
            let (action, comment) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push((file.clone(), action.to_owned(), comment.trim().to_owned()));
        }
    }
    out
}

#[test]
fn every_action_the_workflows_use_is_pinned_to_a_full_commit_sha_with_its_version_in_a_comment() {
    let all = uses();
    assert!(all.len() >= 6, "{all:?}");
    for (file, action, comment) in all {
        if action.starts_with("./") {
            continue; // this repository's own reusable workflows
        }
        let (_, sha) = action
            .split_once('@')
            .unwrap_or_else(|| panic!("{file}: {action} names no ref"));
        assert!(
            sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
            "{file}: {action} is pinned to a full commit sha"
        );
        assert!(
            comment.starts_with("# v"),
            "{file}: {action} says its version ({comment})"
        );
    }
}

#[test]
fn the_pipeline_builds_once_and_deploys_dev_staging_prod_in_turn_through_oidc() {
    let deploy: serde_yaml::Value =
        serde_yaml::from_str(&read(".github/workflows/deploy.yml")).expect("deploy.yml parses");
    let stage: serde_yaml::Value =
        serde_yaml::from_str(&read(".github/workflows/stage.yml")).expect("stage.yml parses");
    let jobs = &deploy["jobs"];
    assert_eq!(jobs["build"]["needs"].as_str(), Some("test"));
    assert_eq!(
        jobs["test"]["uses"].as_str(),
        Some("./.github/workflows/ci.yml")
    );
    let mut previous = "build";
    for name in ["dev", "staging", "prod"] {
        let job = &jobs[name];
        assert_eq!(job["needs"].as_str(), Some(previous), "{name}");
        assert_eq!(
            job["uses"].as_str(),
            Some("./.github/workflows/stage.yml"),
            "{name}"
        );
        assert_eq!(job["with"]["stage"].as_str(), Some(name));
        assert_eq!(job["permissions"]["id-token"].as_str(), Some("write"));
        previous = name;
    }
    // One build: the only `sam build` is the build job's; the stages download its artifact.
    let build_steps = jobs["build"]["steps"].as_sequence().unwrap();
    assert!(build_steps
        .iter()
        .any(|s| s["run"].as_str() == Some("make deploy-build")));
    let steps = stage["jobs"]["deploy"]["steps"].as_sequence().unwrap();
    let step = |prefix: &str| {
        steps
            .iter()
            .position(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(prefix)))
            .unwrap_or_else(|| panic!("stage.yml uses {prefix}"))
    };
    let download = step("actions/download-artifact@");
    let credentials = step("aws-actions/configure-aws-credentials@");
    let run = |needle: &str| {
        steps
            .iter()
            .position(|s| s["run"].as_str().is_some_and(|r| r.contains(needle)))
            .unwrap_or_else(|| panic!("stage.yml runs {needle}"))
    };
    let deployed = run("scripts/deploy.sh deploy");
    let smoked = run("scripts/smoke.sh");
    assert!(download < deployed && credentials < deployed && deployed < smoked);
    assert!(!read(".github/workflows/stage.yml").contains("sam build"));
    // OIDC to the stage's role, no stored keys; the GitHub environment of the stage's name.
    let with = &steps[credentials]["with"];
    assert_eq!(
        with["role-to-assume"].as_str(),
        Some("${{ vars.AWS_DEPLOY_ROLE_ARN }}")
    );
    for workflow in ["ci.yml", "deploy.yml", "stage.yml"] {
        let text = read(&format!(".github/workflows/{workflow}"));
        assert!(!text.contains("aws-access-key-id"), "{workflow}");
        assert!(!text.contains("aws-secret-access-key"), "{workflow}");
    }
    assert_eq!(
        stage["jobs"]["deploy"]["environment"]["name"].as_str(),
        Some("${{ inputs.stage }}")
    );
    // The deploy role trusts only that environment of the repository.
    let role = read("deploy/deploy-role.yaml");
    assert!(role.contains("repo:${GitHubRepository}:environment:${Stage}"));
    assert!(role.contains("token.actions.githubusercontent.com:aud: sts.amazonaws.com"));
}

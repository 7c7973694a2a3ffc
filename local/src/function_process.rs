//! A function's real binary, run as Lambda runs it: a child process with the environment Lambda
//! would give it on a [`TestStack`] (the template's variables resolved to the stack's tables,
//! queues and keys, Lambda's own variables, the emulator's endpoint and credentials), taking its
//! events from a [`RuntimeApi`] of its own.
//!
//! The binaries are built before the tests (scripts/test.sh): a test runs inside `cargo test`,
//! which holds cargo's build lock, so it cannot build them itself.

use crate::runtime_api::{Answer, RuntimeApi};
use crate::template::{FunctionSpec, Template};
use crate::test_stack::TestStack;
use anyhow::{anyhow, bail, Context, Result};
use aws_sdk_dynamodb::config::ProvideCredentials;
use rand::distributions::{Alphanumeric, DistString};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The command that builds every function's binary where [`binary_path`] looks for it.
pub const BUILD_COMMAND: &str = "cargo build --workspace --lib --bins --tests";

/// How long a binary may take from its start to its first request for an event.
const START_LIMIT: Duration = Duration::from_secs(10);
/// How long after its answer a function may take to ask for the next event.
const NEXT_POLL_LIMIT: Duration = Duration::from_secs(5);
/// How often a wait checks that the process is still there.
const LIVENESS_CHECK: Duration = Duration::from_millis(50);

/// The debug build of `binary`: `target/debug/<binary>` of the workspace, or of
/// `CARGO_TARGET_DIR` when that is set. A missing binary is an error saying how to build it.
pub fn binary_path(binary: &str) -> Result<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    };
    let path = target.join("debug").join(binary);
    if !path.is_file() {
        bail!(
            "{} does not exist: build the functions first with `{BUILD_COMMAND}` \
             (scripts/test.sh, i.e. `make test`, does before the tests)",
            path.display()
        );
    }
    Ok(path)
}

/// One function's binary running against its own Runtime API. Dropping it stops the process.
pub struct RunningFunction {
    pub spec: FunctionSpec,
    runtime: RuntimeApi,
    child: Child,
    /// The process's standard output and error (its JSON log lines).
    log: PathBuf,
    invocations: usize,
}

impl RunningFunction {
    /// Starts the binary of the template's function `logical_id` on `t`, and waits until it
    /// asks for its first event.
    pub async fn start(t: &TestStack, logical_id: &str) -> Result<Self> {
        Self::start_from(t, logical_id, None).await
    }

    /// [`Self::start`] with the binary of the build in `profile_dir` (`target/release`, …;
    /// `None`: the debug build).
    pub async fn start_from(
        t: &TestStack,
        logical_id: &str,
        profile_dir: Option<&Path>,
    ) -> Result<Self> {
        let template = Template::load_project()?;
        let spec = template
            .function(logical_id)
            .ok_or_else(|| anyhow!("template.yaml declares no function {logical_id}"))?
            .clone();
        let binary = match profile_dir {
            None => binary_path(&spec.binary)?,
            Some(dir) => dir.join(&spec.binary),
        };
        if !binary.is_file() {
            bail!("{} does not exist: build it first", binary.display());
        }
        let name = format!("{}-{logical_id}", t.stack.prefix);
        let region = t
            .sdk
            .region()
            .map_or_else(|| "us-east-1".to_string(), |r| r.to_string());
        let runtime = RuntimeApi::start(format!(
            "arn:aws:lambda:{region}:{}:function:{name}",
            account_id(t)
        ))
        .await?;
        let env = lambda_environment(t, &spec, &name, &region, &runtime.address()).await?;
        let log = std::env::temp_dir().join(format!("{name}.log"));
        let output = std::fs::File::create(&log)?;
        let task_root = binary.parent().unwrap_or(Path::new("/"));
        let child = Command::new(&binary)
            .env_clear()
            .envs(&env)
            .env("LAMBDA_TASK_ROOT", task_root)
            .current_dir(task_root)
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut function = RunningFunction {
            spec,
            runtime,
            child,
            log,
            invocations: 0,
        };
        function
            .until("its first request for an event", START_LIMIT, |r| {
                (r.polls() > 0).then_some(())
            })
            .await?;
        Ok(function)
    }

    /// Hands `payload` to the function, with a deadline its timeout away, and waits for its
    /// answer (a little longer than the timeout).
    pub async fn invoke(&mut self, payload: &Value) -> Result<Answer> {
        let timeout = Duration::from_secs(self.spec.timeout_seconds.into());
        let request_id = self.runtime.invoke(payload, timeout)?;
        self.invocations += 1;
        self.until("its answer", timeout + Duration::from_secs(5), |r| {
            r.answer(&request_id)
        })
        .await
    }

    /// Waits until the function, having answered every event, asks for the next one: it is
    /// still alive and serving, as a warm Lambda container is.
    pub async fn asks_for_next_event(&mut self) -> Result<()> {
        let answered = self.invocations;
        self.until("its next request for an event", NEXT_POLL_LIMIT, |r| {
            (r.polls() > answered).then_some(())
        })
        .await
    }

    /// The CPU time the process has used so far: user and system, all its threads (those
    /// ended too), from `/proc/<pid>/stat` (Linux; in clock ticks of 10 ms).
    pub fn cpu(&self) -> Result<Duration> {
        process_cpu(self.child.id())
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Ends the process (as Lambda ends an idle container) and reports how it ended.
    pub fn stop(mut self) -> Result<ExitStatus> {
        self.child.kill()?;
        Ok(self.child.wait()?)
    }

    /// What the process wrote so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `limit` for `found` to see `what` on the Runtime API, failing as soon as the
    /// process has exited; a failure names the process's state and shows its log.
    async fn until<T>(
        &mut self,
        what: &str,
        limit: Duration,
        found: impl Fn(&RuntimeApi) -> Option<T>,
    ) -> Result<T> {
        let end = Instant::now() + limit;
        loop {
            if let Some(t) = self.runtime.wait_for(LIVENESS_CHECK, &found).await {
                return Ok(t);
            }
            let state = match self.child.try_wait()? {
                Some(status) => format!("exited ({status})"),
                None if Instant::now() >= end => format!("still running after {limit:?}"),
                None => continue,
            };
            let init_error = self
                .runtime
                .init_error()
                .map(|e| format!(", its init error: {e}"))
                .unwrap_or_default();
            bail!(
                "{} did not get to {what}: {state}{init_error}; its output:\n{}",
                self.spec.binary,
                self.log()
            );
        }
    }
}

impl Drop for RunningFunction {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// User plus system CPU time of process `pid`, all threads, from `/proc/<pid>/stat`.
pub fn process_cpu(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name (in parentheses, which may hold spaces): utime and stime
    // are the 12th and 13th of them (the 14th and 15th of the line).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64> {
        let field = fields
            .get(i)
            .ok_or_else(|| anyhow!("/proc/{pid}/stat is short"))?;
        Ok(field.parse()?)
    };
    let total = ticks(11)? + ticks(12)?;
    // USER_HZ is 100 on Linux.
    Ok(Duration::from_millis(total * 10))
}

/// The whole environment of the function's process (nothing of the test process's own):
/// the template's variables on this stack, Lambda's reserved variables, and the emulator's
/// endpoint and credentials as `scripts/with-emulator.sh` gives them to the harness.
async fn lambda_environment(
    t: &TestStack,
    spec: &FunctionSpec,
    name: &str,
    region: &str,
    runtime_api: &str,
) -> Result<BTreeMap<String, String>> {
    let mut provided = BTreeMap::new();
    for id in t.stack.unprovisioned_refs(spec) {
        provided.insert(id.to_string(), unprovisioned(t, id, region).await?);
    }
    let mut env = t.stack.function_env(spec, &provided)?;
    let credentials = t
        .sdk
        .credentials_provider()
        .ok_or_else(|| anyhow!("the harness's SDK configuration has no credentials"))?
        .provide_credentials()
        .await?;
    let lambda = [
        ("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string()),
        ("AWS_LAMBDA_FUNCTION_NAME", name.to_string()),
        (
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
            spec.memory_mb.to_string(),
        ),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
        (
            "AWS_LAMBDA_LOG_STREAM_NAME",
            format!("local/[$LATEST]{}", uuid::Uuid::new_v4().simple()),
        ),
        ("_HANDLER", "bootstrap".into()),
        ("TZ", ":UTC".into()),
        ("AWS_REGION", region.to_string()),
        ("AWS_DEFAULT_REGION", region.to_string()),
        ("AWS_ACCESS_KEY_ID", credentials.access_key_id().to_string()),
        (
            "AWS_SECRET_ACCESS_KEY",
            credentials.secret_access_key().to_string(),
        ),
        ("AWS_ENDPOINT_URL", crate::emulator::endpoint().await?),
    ];
    env.extend(lambda.map(|(k, v)| (k.to_string(), v)));
    if let Some(token) = credentials.session_token() {
        env.insert("AWS_SESSION_TOKEN".into(), token.to_string());
    }
    Ok(env)
}

/// The value of `!Ref id` for a resource a function's own environment names that the stack does
/// not provision: made on the emulator for this process as the template makes it, or (the SNS
/// topic, which only the API compares messages against) its ARN.
async fn unprovisioned(t: &TestStack, id: &str, region: &str) -> Result<String> {
    let prefix = &t.stack.prefix;
    let secret = |name: String, value: String| async move {
        aws_sdk_secretsmanager::Client::new(&t.sdk)
            .create_secret()
            .name(&name)
            .secret_string(value)
            .send()
            .await
            .with_context(|| format!("creating the secret {name}"))?
            .arn
            .ok_or_else(|| anyhow!("no ARN for the secret {name}"))
    };
    match id {
        // Created empty; operators put the providers' secrets.
        "ProviderEventSecrets" => {
            secret(format!("{prefix}/provider-event-secrets"), "{}".into()).await
        }
        // Generated: 64 letters and digits.
        "ConsoleSigningKey" => {
            let key = Alphanumeric.sample_string(&mut rand::thread_rng(), 64);
            secret(format!("{prefix}/console-signing-key"), key).await
        }
        // The stack's own (the in-process API's): tokens either issues, the other checks.
        "TokenCheckKey" => t
            .config
            .token_check_key_arn
            .clone()
            .ok_or_else(|| anyhow!("the test stack has no token-check key")),
        "NotificationConfigurationSet" => {
            let name = format!("{prefix}-{id}");
            aws_sdk_sesv2::Client::new(&t.sdk)
                .create_configuration_set()
                .configuration_set_name(&name)
                .send()
                .await
                .with_context(|| format!("creating the SES configuration set {name}"))?;
            Ok(name)
        }
        "NotificationEventsTopic" => Ok(format!(
            "arn:aws:sns:{region}:{}:{prefix}-{id}",
            account_id(t)
        )),
        other => bail!("a function's environment names {other}, which the harness cannot make"),
    }
}

/// The emulator's account, as its queues' ARNs name it.
fn account_id(t: &TestStack) -> String {
    t.stack
        .queues
        .values()
        .find_map(|q| q.arn.split(':').nth(4).map(str::to_string))
        .unwrap_or_else(|| "000000000000".into())
}

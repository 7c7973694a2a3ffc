//! The deploy pipeline cannot grant itself the account: `deploy/deploy-role.yaml`'s statements,
//! resolved for each stage and evaluated by [`crate::iam_eval`], refuse every escalation (a role
//! without the stack's permissions boundary, a managed policy attached, the boundary removed or
//! edited, a role outside the stack passed, another stage's keys or distribution managed, a key
//! created untagged) and a token of another workflow or branch for staging and prod, while every
//! call CloudFormation makes to deploy `template.yaml` (`deploy_calls.rs`: as SAM translates it,
//! every optional resource included, the edge too) is allowed. The boundary allows what each of
//! the stack's roles grants and nothing on IAM, STS or key management.

use crate::deploy_calls::{
    app_stack, app_stack_of, calls_for, key_of, resolved, texts, ACCOUNT, REGION,
};
use crate::deployment::{read, translated};
use crate::iam_eval::{decide, decide_bounded, like, long_form, Decision, Request, Stack};
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;

const REPOSITORY: &str = "octo-org/rhythm";
const STAGES: [&str; 3] = ["dev", "staging", "prod"];

/// The deploy stack of a stage, as `aws cloudformation deploy` in docs/deploy.md creates it.
struct DeployStack {
    stack: Stack,
    doc: Json,
}

impl DeployStack {
    fn of(stage: &str) -> Self {
        let doc = long_form(&serde_yaml::from_str(&read("deploy/deploy-role.yaml")).unwrap());
        let mut params: BTreeMap<String, String> = doc["Parameters"]
            .as_object()
            .unwrap()
            .iter()
            .filter_map(|(k, p)| Some((k.clone(), p["Default"].as_str()?.to_string())))
            .collect();
        for (k, v) in [
            ("GitHubRepository", REPOSITORY.to_string()),
            ("Stage", stage.to_string()),
            ("AppStackName", app_stack_of(stage)),
            ("AWS::StackName", format!("rhythm-delivery-deploy-{stage}")),
        ] {
            params.insert(k.to_string(), v);
        }
        let mut stack = Stack {
            params,
            conditions: doc["Conditions"].clone(),
            values: BTreeMap::new(),
            account: ACCOUNT.into(),
            region: REGION.into(),
        };
        let iam = |kind: &str, name: &str| format!("arn:aws:iam::{ACCOUNT}:{kind}/{name}");
        // What `Ref Boundary` gives: the ARN of the policy the template names.
        let boundary = resolved(
            &stack,
            &doc["Resources"]["Boundary"]["Properties"]["ManagedPolicyName"],
        );
        let bucket = format!("rhythm-deploy-{stage}-artifacts");
        let role = |id: &str| iam("role", &format!("rhythm-delivery-deploy-{stage}-{id}-A1"));
        stack.values = BTreeMap::from([
            ("Boundary".to_string(), iam("policy", &boundary)),
            (
                "ArtifactBucket.Arn".to_string(),
                format!("arn:aws:s3:::{bucket}"),
            ),
            ("ArtifactBucket".to_string(), bucket),
            ("ExecutionRole.Arn".to_string(), role("ExecutionRole")),
            ("DeployRole.Arn".to_string(), role("DeployRole")),
            (
                "GitHubOidcProvider".to_string(),
                iam("oidc-provider", "token.actions.githubusercontent.com"),
            ),
        ]);
        DeployStack { stack, doc }
    }

    fn value(&self, name: &str) -> String {
        self.stack.values[name].clone()
    }

    /// Every statement of a resource's policies (a role's inline ones, a managed policy's, a
    /// role's trust policy with `document`), resolved.
    fn statements(&self, id: &str, document: &str) -> Vec<Json> {
        let properties = &self.doc["Resources"][id]["Properties"];
        let documents: Vec<&Json> = match properties[document].as_array() {
            Some(policies) => policies.iter().map(|p| &p["PolicyDocument"]).collect(),
            None => vec![&properties[document]],
        };
        documents
            .into_iter()
            .flat_map(|d| d["Statement"].as_array().unwrap().clone())
            .map(|s| self.stack.resolve(&s).unwrap())
            .collect()
    }

    fn executes(&self, request: &Request) -> Decision {
        decide(&self.statements("ExecutionRole", "Policies"), request)
    }

    fn app(&self) -> Stack {
        app_stack(&self.stack.params["Stage"], &self.value("ArtifactBucket"))
    }
}

fn allowed(decision: Decision) -> bool {
    decision == Decision::Allowed
}

fn resources() -> impl Iterator<Item = (&'static String, &'static Json)> {
    translated()["Resources"].as_object().unwrap().iter()
}

/// The stack of another stage (whose keys, roles and distribution a stage must not reach).
fn other_than(stage: &str) -> String {
    app_stack_of(if stage == "prod" { "dev" } else { "prod" })
}

#[test]
fn the_execution_role_allows_every_call_of_the_stacks_own_deploy_edge_included() {
    for kind in [
        "AWS::WAFv2::WebACL",
        "AWS::CloudFront::Distribution",
        "AWS::IAM::Role",
        "AWS::KMS::Key",
    ] {
        assert!(resources().any(|(_, r)| r["Type"] == kind), "covers {kind}");
    }
    for stage in STAGES {
        let deploy = DeployStack::of(stage);
        let app = deploy.app();
        let mut calls = 0;
        let mut refused = Vec::new();
        for (id, r) in resources() {
            for request in calls_for(&app, &deploy.value("ArtifactBucket"), id, r) {
                calls += 1;
                let decision = deploy.executes(&request);
                if !allowed(decision) {
                    refused.push(format!("{id}: {request:?} -> {decision:?}"));
                }
            }
        }
        assert!(calls > 500, "{stage}: {calls} calls");
        assert!(
            refused.is_empty(),
            "{stage} refuses\n{}",
            refused.join("\n")
        );
    }
}

#[test]
fn every_role_the_stack_creates_carries_its_deploy_stacks_boundary_and_attaches_no_managed_policy()
{
    let roles: Vec<_> = resources()
        .filter(|(_, r)| r["Type"] == "AWS::IAM::Role")
        .collect();
    assert_eq!(
        roles.len(),
        9,
        "six function roles and three schedule roles"
    );
    for stage in STAGES {
        let deploy = DeployStack::of(stage);
        let app = deploy.app();
        for (id, role) in &roles {
            let boundary = resolved(&app, &role["Properties"]["PermissionsBoundary"]);
            assert_eq!(boundary, deploy.value("Boundary"), "{stage}: {id}");
            assert!(role["Properties"]["ManagedPolicyArns"].is_null(), "{id}");
        }
    }
    // A developer's own stack (samconfig's default, deployed with their own rights): none.
    let mut sandbox = DeployStack::of("dev").app();
    sandbox
        .params
        .insert("PermissionsBoundaryPolicy".into(), String::new());
    for (id, role) in &roles {
        let boundary = sandbox.resolve(&role["Properties"]["PermissionsBoundary"]);
        assert_eq!(boundary, None, "{id}");
    }
}

/// Role, policy and boundary escalations, each with what it tries.
fn role_escalations(deploy: &DeployStack, stage: &str) -> Vec<(&'static str, Request)> {
    let app = app_stack_of(stage);
    let role = |name: &str| format!("arn:aws:iam::{ACCOUNT}:role/{name}");
    let own = role(&format!("{app}-ApiRole-1A2B3C"));
    let boundary = deploy.value("Boundary");
    let admin = "arn:aws:iam::aws:policy/AdministratorAccess";
    let bounded = |action: &str, on: &str| {
        Request::new(action, on).with("iam:PermissionsBoundary", &[&boundary])
    };
    let new_role = role(&format!("{app}-Admin"));
    vec![
        (
            "a role without the boundary",
            Request::new("iam:CreateRole", &new_role),
        ),
        (
            "a role with another boundary",
            Request::new("iam:CreateRole", &new_role).with("iam:PermissionsBoundary", &[admin]),
        ),
        (
            "AdministratorAccess attached",
            bounded("iam:AttachRolePolicy", &own).with("iam:PolicyARN", &[admin]),
        ),
        (
            "a managed policy the template does not use",
            bounded("iam:AttachRolePolicy", &own).with(
                "iam:PolicyARN",
                &["arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
            ),
        ),
        (
            "a policy on a role without the boundary",
            Request::new("iam:PutRolePolicy", &own),
        ),
        (
            "the boundary removed",
            bounded("iam:DeleteRolePermissionsBoundary", &own),
        ),
        (
            "the boundary changed",
            Request::new("iam:PutRolePermissionsBoundary", &own)
                .with("iam:PermissionsBoundary", &[admin]),
        ),
        (
            "the boundary edited",
            Request::new("iam:CreatePolicyVersion", &boundary),
        ),
        (
            "the boundary switched",
            Request::new("iam:SetDefaultPolicyVersion", &boundary),
        ),
        (
            "the boundary deleted",
            Request::new("iam:DeletePolicy", &boundary),
        ),
        (
            "a policy on a role outside the stack",
            bounded("iam:PutRolePolicy", &role("deployer")),
        ),
        (
            "another role assumed",
            Request::new("sts:AssumeRole", &role("Admin")),
        ),
        (
            "a user's access key",
            Request::new(
                "iam:CreateAccessKey",
                &format!("arn:aws:iam::{ACCOUNT}:user/a"),
            ),
        ),
        (
            "the organization left",
            Request::new("organizations:LeaveOrganization", "*"),
        ),
    ]
}

/// Roles passed that are not the stack's, or to a service that is not its functions' or
/// schedules'.
fn pass_escalations(stage: &str) -> Vec<(&'static str, Request)> {
    let (app, other) = (app_stack_of(stage), other_than(stage));
    let role = |name: &str| format!("arn:aws:iam::{ACCOUNT}:role/{name}");
    let own = role(&format!("{app}-ApiRole-1A2B3C"));
    let pass = |on: &str, service: &str| {
        Request::new("iam:PassRole", on).with("iam:PassedToService", &[service])
    };
    vec![
        (
            "a role outside the stack passed",
            pass(
                &role("OrganizationAccountAccessRole"),
                "lambda.amazonaws.com",
            ),
        ),
        (
            "another stage's role passed",
            pass(
                &role(&format!("{other}-ApiRole-9Z")),
                "lambda.amazonaws.com",
            ),
        ),
        (
            "a stack role passed to EC2",
            pass(&own, "ec2.amazonaws.com"),
        ),
    ]
}

/// Key and distribution escalations: another stage's, an untagged one, the tag moved.
fn tag_escalations(stage: &str) -> Vec<(&'static str, Request)> {
    let (app, other) = (app_stack_of(stage), other_than(stage));
    let key = format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/1234");
    let of = |stack: &str, action: &str| {
        Request::new(action, &key).with("aws:ResourceTag/rhythm:stack", &[stack])
    };
    let tagged = |r: Request, to: &str| {
        r.with("aws:RequestTag/rhythm:stack", &[to])
            .with("aws:TagKeys", &["rhythm:stack"])
    };
    let distribution = format!("arn:aws:cloudfront::{ACCOUNT}:distribution/E9OTHER");
    vec![
        ("another stage's key policy", of(&other, "kms:PutKeyPolicy")),
        (
            "an untagged key's policy",
            Request::new("kms:PutKeyPolicy", &key),
        ),
        (
            "another stage's key deleted",
            of(&other, "kms:ScheduleKeyDeletion"),
        ),
        ("another stage's key aliased", of(&other, "kms:CreateAlias")),
        (
            "another stage's key claimed",
            tagged(of(&other, "kms:TagResource"), &app),
        ),
        (
            "the stack's key given away",
            tagged(of(&app, "kms:TagResource"), &other),
        ),
        (
            "the stack's tag removed",
            of(&app, "kms:UntagResource").with("aws:TagKeys", &["rhythm:stack"]),
        ),
        ("a key created untagged", Request::new("kms:CreateKey", "*")),
        (
            "a key created with another stage's tag",
            tagged(Request::new("kms:CreateKey", "*"), &other),
        ),
        (
            "another stage's distribution changed",
            Request::new("cloudfront:UpdateDistribution", &distribution)
                .with("aws:ResourceTag/rhythm:stack", &[&other]),
        ),
        (
            "a distribution created untagged",
            Request::new("cloudfront:CreateDistribution", &distribution),
        ),
    ]
}

#[test]
fn the_execution_role_refuses_every_way_to_grant_itself_the_account() {
    for stage in STAGES {
        let deploy = DeployStack::of(stage);
        let escalations = role_escalations(&deploy, stage)
            .into_iter()
            .chain(pass_escalations(stage))
            .chain(tag_escalations(stage));
        for (what, request) in escalations {
            let decision = deploy.executes(&request);
            assert!(
                !allowed(decision),
                "{stage}: {what} is allowed: {request:?}"
            );
        }
        // The stack's own boundary, role, key and tag are allowed: the refusals above are the
        // conditions', not a missing grant.
        let app = app_stack_of(stage);
        let own_role = format!("arn:aws:iam::{ACCOUNT}:role/{app}-Admin");
        let key = format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/1234");
        for request in [
            Request::new("iam:CreateRole", &own_role)
                .with("iam:PermissionsBoundary", &[&deploy.value("Boundary")]),
            Request::new("iam:PassRole", &own_role)
                .with("iam:PassedToService", &["lambda.amazonaws.com"]),
            Request::new("kms:PutKeyPolicy", &key).with("aws:ResourceTag/rhythm:stack", &[&app]),
            Request::new("kms:CreateKey", "*")
                .with("aws:RequestTag/rhythm:stack", &[&app])
                .with("aws:TagKeys", &["rhythm:stack"]),
        ] {
            assert!(allowed(deploy.executes(&request)), "{stage}: {request:?}");
        }
    }
}

/// Each Allow of each role of the translated template as requests: `(role, request)`.
fn role_grants(app: &Stack) -> Vec<(String, Request)> {
    let mut out = Vec::new();
    for (id, r) in resources().filter(|(_, r)| r["Type"] == "AWS::IAM::Role") {
        let role = app.resolve(r).unwrap();
        for policy in role["Properties"]["Policies"].as_array().unwrap() {
            let statements = policy["PolicyDocument"]["Statement"].as_array().unwrap();
            for s in statements.iter().filter(|s| s["Effect"] == "Allow") {
                for action in texts(&s["Action"]) {
                    for resource in texts(&s["Resource"]) {
                        let mut request = Request::new(&action, &resource);
                        if resource.contains(":key/") {
                            let (_, tags) = key_of(app, &json!(resource));
                            request.context.extend(tags);
                        }
                        out.push((id.clone(), request));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_boundary_allows_what_the_stacks_roles_grant_and_nothing_that_escalates() {
    for stage in STAGES {
        let deploy = DeployStack::of(stage);
        let boundary = deploy.statements("Boundary", "PolicyDocument");
        let grants = role_grants(&deploy.app());
        assert!(grants.len() > 50, "{}", grants.len());
        for (role, request) in grants {
            let decision = decide(&boundary, &request);
            assert!(
                allowed(decision),
                "{stage}: the boundary refuses {role}'s {request:?}"
            );
        }
        // Even a role whose own policy allowed everything gets nothing else: no statement
        // grants IAM, STS, Organizations, key management or the stack's control plane, on any
        // resource.
        for s in &boundary {
            assert!(s["NotAction"].is_null() && s["Effect"] == "Allow", "{s}");
            for pattern in texts(&s["Action"]) {
                for action in ESCALATING {
                    let hit = like(&pattern.to_lowercase(), &action.to_lowercase());
                    assert!(!hit, "{stage}: the boundary grants {action} ({pattern})");
                }
            }
        }
        let everything = [json!({"Effect": "Allow", "Action": "*", "Resource": "*"})];
        let bounded = |r: &Request| allowed(decide_bounded(&everything, &boundary, r));
        let other = other_than(stage);
        let key = format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/1");
        let secret = format!("secret:{other}/console-signing-key-AbC");
        for request in [
            Request::new(
                "dynamodb:GetItem",
                &format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{other}-DeliveryTable-X"),
            ),
            Request::new("kms:Decrypt", &key).with("aws:ResourceTag/rhythm:stack", &[&other]),
            Request::new("kms:Decrypt", &key),
            Request::new(
                "secretsmanager:GetSecretValue",
                &format!("arn:aws:secretsmanager:{REGION}:{ACCOUNT}:{secret}"),
            ),
        ] {
            assert!(!bounded(&request), "{stage}: another stage's {request:?}");
        }
    }
}

/// Actions no role of the app stack may have, whatever its own policy says.
const ESCALATING: &[&str] = &[
    "iam:CreateRole",
    "iam:PassRole",
    "iam:PutRolePolicy",
    "iam:AttachRolePolicy",
    "iam:CreatePolicyVersion",
    "iam:CreateAccessKey",
    "sts:AssumeRole",
    "organizations:LeaveOrganization",
    "kms:PutKeyPolicy",
    "kms:CreateGrant",
    "kms:ScheduleKeyDeletion",
    "secretsmanager:PutSecretValue",
    "lambda:UpdateFunctionCode",
    "lambda:CreateFunction",
    "dynamodb:DeleteTable",
    "cloudformation:CreateChangeSet",
    "s3:GetObject",
];

/// A token of GitHub's OIDC provider as IAM sees it: its audience and subject.
fn token(sub: &str) -> Request {
    Request::new("sts:AssumeRoleWithWebIdentity", "")
        .with(
            "token.actions.githubusercontent.com:aud",
            &["sts.amazonaws.com"],
        )
        .with("token.actions.githubusercontent.com:sub", &[sub])
}

/// The subject with the repository's template (docs/deploy.md): environment, workflow and branch.
fn run(environment: &str, workflow: &str, branch: &str) -> Request {
    token(&format!(
        "repo:{REPOSITORY}:environment:{environment}:job_workflow_ref:\
         {REPOSITORY}/.github/workflows/{workflow}@refs/heads/{branch}"
    ))
}

#[test]
fn staging_and_prod_trust_only_the_stage_workflow_on_main_dev_its_environment() {
    for stage in STAGES {
        let deploy = DeployStack::of(stage);
        let trust = deploy.statements("DeployRole", "AssumeRolePolicyDocument");
        assert_eq!(
            trust[0]["Principal"]["Federated"],
            deploy.value("GitHubOidcProvider")
        );
        let trusts = |request: &Request| allowed(decide(&trust, request));
        assert!(
            trusts(&run(stage, "stage.yml", "main")),
            "{stage}: the pipeline"
        );
        let other = if stage == "prod" { "staging" } else { "prod" };
        assert!(
            !trusts(&run(other, "stage.yml", "main")),
            "{stage}: {other}"
        );
        assert!(!trusts(&token(&format!(
            "repo:someone/else:environment:{stage}"
        ))));
        let mut audience = run(stage, "stage.yml", "main");
        audience.context.insert(
            "token.actions.githubusercontent.com:aud".into(),
            vec!["https://github.com/octo-org".into()],
        );
        assert!(!trusts(&audience), "{stage}: another audience");
        let default_subject = token(&format!("repo:{REPOSITORY}:environment:{stage}"));
        let elsewhere = [
            run(stage, "evil.yml", "main"),
            run(stage, "stage.yml", "feature"),
        ];
        if stage == "dev" {
            assert!(trusts(&default_subject), "dev: GitHub's default subject");
            assert!(
                elsewhere.iter().all(trusts),
                "dev: any run of its environment"
            );
        } else {
            assert!(
                !trusts(&default_subject),
                "{stage}: the workflow must be named"
            );
            for request in elsewhere {
                assert!(!trusts(&request), "{stage}: {request:?}");
            }
        }
    }
    // The repository setting that makes those subjects, and the pipeline's main-only stages.
    let guide = read("docs/deploy.md");
    assert!(guide.contains("actions/oidc/customization/sub") && guide.contains("job_workflow_ref"));
    let workflow: serde_yaml::Value =
        serde_yaml::from_str(&read(".github/workflows/deploy.yml")).unwrap();
    for stage in ["staging", "prod"] {
        let condition = workflow["jobs"][stage]["if"].as_str();
        assert_eq!(
            condition,
            Some("github.ref == 'refs/heads/main'"),
            "{stage}"
        );
    }
}

//! What CloudFormation calls, as the deploy pipeline's execution role, to create, update and
//! delete `template.yaml`'s resources (SAM's translation, every optional resource included):
//! one table of each resource type's handler calls, with the ARNs CloudFormation's generated
//! names give in the stage's stack and the request context IAM then sees (the boundary a role is
//! created with, the tags a key or distribution is created with and carries afterwards, the
//! service a role is passed to). `deploy_role.rs` asks the execution role about each.

use crate::deployment::{samconfig, translated};
use crate::iam_eval::{Request, Stack};
use serde_json::Value as Json;
use std::collections::BTreeMap;

pub const ACCOUNT: &str = "111122223333";
pub const REGION: &str = "us-east-1";

/// samconfig.toml's stack name of a stage.
pub fn app_stack_of(stage: &str) -> String {
    samconfig()[&format!("{stage}.deploy.parameters")]["stack_name"].clone()
}

/// samconfig.toml's parameter overrides of a stage: `K="V" ...`.
fn overrides(stage: &str) -> BTreeMap<String, String> {
    let text = samconfig()[&format!("{stage}.deploy.parameters")]["parameter_overrides"].clone();
    text.split("\" ")
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim_matches('"').to_string()))
        .collect()
}

fn text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Null => String::new(),
        other => other.to_string(),
    }
}

pub fn texts(v: &Json) -> Vec<String> {
    match v {
        Json::Array(items) => items.iter().map(text).collect(),
        Json::Null => Vec::new(),
        other => vec![text(other)],
    }
}

pub fn resolved(stack: &Stack, v: &Json) -> String {
    stack.resolve(v).map(|v| text(&v)).unwrap_or_default()
}

fn arn(service: &str, rest: &str) -> String {
    format!("arn:aws:{service}:{REGION}:{ACCOUNT}:{rest}")
}

/// The app stack of a stage as samconfig.toml deploys it: parameter values, and what `Ref` and
/// `GetAtt` give for each resource (generated names begin with the stack name, as
/// CloudFormation generates them).
pub fn app_stack(stage: &str, artifact_bucket: &str) -> Stack {
    let doc = translated();
    let mut params: BTreeMap<String, String> = doc["Parameters"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, p)| (k.clone(), text(&p["Default"])))
        .collect();
    params.extend(overrides(stage));
    params.insert("AWS::StackName".into(), app_stack_of(stage));
    let mut stack = Stack {
        params,
        conditions: doc["Conditions"].clone(),
        values: BTreeMap::from([("ArtifactBucket".to_string(), artifact_bucket.to_string())]),
        account: ACCOUNT.into(),
        region: REGION.into(),
    };
    let mut values = stack.values.clone();
    for (id, r) in doc["Resources"].as_object().unwrap() {
        values.extend(resource_values(&stack, id, r));
    }
    stack.values = values;
    stack
}

/// `id` → its `Ref`, `id.Attribute` → its `GetAtt`.
fn resource_values(stack: &Stack, id: &str, r: &Json) -> Vec<(String, String)> {
    let generated = format!("{}-{id}-1A2B3C", stack.params["AWS::StackName"]);
    let named = |property: &str| match resolved(stack, &r["Properties"][property]) {
        name if name.is_empty() => generated.clone(),
        name => name,
    };
    let (reference, attributes) = match r["Type"].as_str().unwrap() {
        "AWS::DynamoDB::Table" => {
            let table = arn("dynamodb", &format!("table/{generated}"));
            let stream = format!("{table}/stream/2026-12-07T00:00:00.000");
            (
                generated.clone(),
                vec![("Arn", table), ("StreamArn", stream)],
            )
        }
        "AWS::SQS::Queue" => (
            format!("https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{generated}"),
            vec![("Arn", arn("sqs", &generated))],
        ),
        "AWS::SNS::Topic" => (arn("sns", &generated), vec![]),
        "AWS::KMS::Key" => (
            format!("key-{id}"),
            vec![("Arn", arn("kms", &format!("key/key-{id}")))],
        ),
        "AWS::SecretsManager::Secret" => (
            arn(
                "secretsmanager",
                &format!("secret:{}-AbCdEf", named("Name")),
            ),
            vec![],
        ),
        "AWS::Logs::LogGroup" => {
            let group = named("LogGroupName");
            let group_arn = arn("logs", &format!("log-group:{group}:*"));
            (group, vec![("Arn", group_arn)])
        }
        "AWS::IAM::Role" => {
            let role = format!("arn:aws:iam::{ACCOUNT}:role/{generated}");
            (generated.clone(), vec![("Arn", role)])
        }
        "AWS::Lambda::Function" => {
            let function = arn("lambda", &format!("function:{generated}"));
            (generated.clone(), vec![("Arn", function)])
        }
        "AWS::WAFv2::WebACL" => {
            let acl = named("Name");
            let acl_arn = arn("wafv2", &format!("global/webacl/{acl}/0a1b2c3d"));
            (format!("{acl}|0a1b2c3d|CLOUDFRONT"), vec![("Arn", acl_arn)])
        }
        "AWS::CloudFront::Distribution" => (
            "E1EDGE".into(),
            vec![("DomainName", "d1.cloudfront.net".into())],
        ),
        "AWS::ApiGatewayV2::Api" => ("a1b2c3".into(), vec![]),
        _ => (named("Name"), vec![]),
    };
    let mut out = vec![(id.to_string(), reference)];
    out.extend(
        attributes
            .into_iter()
            .map(|(a, v)| (format!("{id}.{a}"), v)),
    );
    out
}

/// A resource's tags as IAM sees them when it is created (`aws:RequestTag/K`, `aws:TagKeys`,
/// CloudFormation's own aws:cloudformation:* tag among them) or afterwards (`aws:ResourceTag/K`).
pub fn tag_context(stack: &Stack, r: &Json, created: bool) -> Vec<(String, Vec<String>)> {
    let prefix = if created {
        "aws:RequestTag"
    } else {
        "aws:ResourceTag"
    };
    let mut out = Vec::new();
    let mut keys = vec!["aws:cloudformation:stack-name".to_string()];
    for tag in r["Properties"]["Tags"].as_array().into_iter().flatten() {
        let key = text(&tag["Key"]);
        out.push((
            format!("{prefix}/{key}"),
            vec![resolved(stack, &tag["Value"])],
        ));
        keys.push(key);
    }
    if created {
        out.push(("aws:TagKeys".to_string(), keys));
    }
    out
}

pub fn with_all(mut request: Request, context: &[(String, Vec<String>)]) -> Request {
    request.context.extend(context.iter().cloned());
    request
}

/// Each resource type: the handler's calls while it creates the resource (made with the
/// "created" context: the role's boundary, the resource's request tags) and its other calls
/// (with the tags the resource carries).
#[rustfmt::skip]
const HANDLER_CALLS: &[(&str, &[&str], &[&str])] = &[
    ("AWS::IAM::Role",
     &["iam:CreateRole", "iam:PutRolePolicy", "iam:DeleteRolePolicy"],
     &["iam:GetRole", "iam:GetRolePolicy", "iam:UpdateAssumeRolePolicy", "iam:TagRole",
       "iam:ListRolePolicies", "iam:ListAttachedRolePolicies", "iam:DeleteRole"]),
    ("AWS::Lambda::Function", &["lambda:CreateFunction", "lambda:TagResource"],
     &["lambda:GetFunction", "lambda:UpdateFunctionCode", "lambda:UpdateFunctionConfiguration",
       "lambda:DeleteFunction", "lambda:ListTags"]),
    ("AWS::Lambda::Permission", &["lambda:AddPermission"], &["lambda:GetPolicy", "lambda:RemovePermission"]),
    ("AWS::Lambda::EventSourceMapping", &["lambda:CreateEventSourceMapping"],
     &["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping", "lambda:DeleteEventSourceMapping"]),
    ("AWS::DynamoDB::Table", &["dynamodb:CreateTable", "dynamodb:TagResource"],
     &["dynamodb:DescribeTable", "dynamodb:UpdateTable", "dynamodb:DeleteTable", "dynamodb:ListTagsOfResource",
       "dynamodb:UpdateTimeToLive", "dynamodb:DescribeTimeToLive", "dynamodb:UpdateContinuousBackups",
       "dynamodb:DescribeContinuousBackups"]),
    ("AWS::SQS::Queue", &["sqs:CreateQueue", "sqs:TagQueue"],
     &["sqs:GetQueueAttributes", "sqs:SetQueueAttributes", "sqs:DeleteQueue", "sqs:ListQueueTags"]),
    ("AWS::SQS::QueuePolicy", &["sqs:SetQueueAttributes"], &["sqs:GetQueueAttributes"]),
    ("AWS::SNS::Topic", &["sns:CreateTopic", "sns:TagResource"],
     &["sns:GetTopicAttributes", "sns:SetTopicAttributes", "sns:DeleteTopic", "sns:ListTagsForResource"]),
    ("AWS::SNS::TopicPolicy", &["sns:SetTopicAttributes"], &["sns:GetTopicAttributes"]),
    ("AWS::SNS::Subscription", &["sns:Subscribe"], &["sns:GetSubscriptionAttributes", "sns:Unsubscribe"]),
    ("AWS::KMS::Key", &["kms:CreateKey", "kms:TagResource"],
     &["kms:DescribeKey", "kms:GetKeyPolicy", "kms:PutKeyPolicy", "kms:EnableKeyRotation",
       "kms:GetKeyRotationStatus", "kms:UpdateKeyDescription", "kms:ListResourceTags", "kms:TagResource",
       "kms:ScheduleKeyDeletion"]),
    ("AWS::KMS::Alias", &["kms:CreateAlias"], &["kms:UpdateAlias", "kms:DeleteAlias"]),
    ("AWS::SecretsManager::Secret", &["secretsmanager:CreateSecret", "secretsmanager:TagResource"],
     &["secretsmanager:DescribeSecret", "secretsmanager:UpdateSecret", "secretsmanager:DeleteSecret"]),
    ("AWS::Logs::LogGroup", &["logs:CreateLogGroup", "logs:TagResource"],
     &["logs:PutRetentionPolicy", "logs:DeleteLogGroup", "logs:ListTagsForResource"]),
    ("AWS::CloudWatch::Alarm", &["cloudwatch:PutMetricAlarm", "cloudwatch:TagResource"],
     &["cloudwatch:DescribeAlarms", "cloudwatch:DeleteAlarms"]),
    ("AWS::Scheduler::Schedule", &["scheduler:CreateSchedule"],
     &["scheduler:GetSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"]),
    ("AWS::ApplicationAutoScaling::ScalableTarget", &["application-autoscaling:RegisterScalableTarget"],
     &["application-autoscaling:DescribeScalableTargets", "application-autoscaling:DeregisterScalableTarget"]),
    ("AWS::ApplicationAutoScaling::ScalingPolicy", &["application-autoscaling:PutScalingPolicy"],
     &["application-autoscaling:DescribeScalingPolicies", "application-autoscaling:DeleteScalingPolicy"]),
    ("AWS::SES::ConfigurationSet", &["ses:CreateConfigurationSet"],
     &["ses:GetConfigurationSet", "ses:DeleteConfigurationSet"]),
    ("AWS::SES::ConfigurationSetEventDestination", &["ses:CreateConfigurationSetEventDestination"],
     &["ses:UpdateConfigurationSetEventDestination", "ses:DeleteConfigurationSetEventDestination",
       "ses:GetConfigurationSetEventDestinations"]),
    ("AWS::ApiGatewayV2::Api", &["apigateway:POST"],
     &["apigateway:GET", "apigateway:PATCH", "apigateway:PUT", "apigateway:DELETE"]),
    ("AWS::ApiGatewayV2::Stage", &["apigateway:POST"],
     &["apigateway:GET", "apigateway:PATCH", "apigateway:DELETE"]),
    ("AWS::WAFv2::WebACL", &["wafv2:CreateWebACL", "wafv2:TagResource"],
     &["wafv2:GetWebACL", "wafv2:UpdateWebACL", "wafv2:DeleteWebACL", "wafv2:ListTagsForResource"]),
    ("AWS::WAFv2::LoggingConfiguration", &["wafv2:PutLoggingConfiguration"],
     &["wafv2:GetLoggingConfiguration", "wafv2:DeleteLoggingConfiguration"]),
    ("AWS::CloudFront::Distribution", &["cloudfront:CreateDistribution", "cloudfront:TagResource"],
     &["cloudfront:GetDistribution", "cloudfront:GetDistributionConfig", "cloudfront:UpdateDistribution",
       "cloudfront:DeleteDistribution", "cloudfront:ListTagsForResource", "cloudfront:TagResource"]),
];

/// The ARNs a resource's handler calls act on.
fn targets(stack: &Stack, id: &str, r: &Json) -> Vec<String> {
    let p = &r["Properties"];
    let own = |attribute: &str| stack.values[&format!("{id}.{attribute}")].clone();
    let reference = stack.values[id].clone();
    let function = |v: &Json| match resolved(stack, v) {
        name if name.starts_with("arn:") => name,
        name => arn("lambda", &format!("function:{name}")),
    };
    let api = format!("arn:aws:apigateway:{REGION}::/apis");
    match r["Type"].as_str().unwrap() {
        "AWS::IAM::Role"
        | "AWS::DynamoDB::Table"
        | "AWS::SQS::Queue"
        | "AWS::KMS::Key"
        | "AWS::Lambda::Function"
        | "AWS::WAFv2::WebACL" => vec![own("Arn")],
        "AWS::SNS::Topic" | "AWS::SecretsManager::Secret" => vec![reference],
        "AWS::Lambda::Permission" => vec![function(&p["FunctionName"])],
        "AWS::Lambda::EventSourceMapping" => vec![arn("lambda", "event-source-mapping:0a1b")],
        "AWS::SQS::QueuePolicy" => texts(&stack.resolve(&p["Queues"]).unwrap())
            .iter()
            .map(|url| arn("sqs", url.rsplit('/').next().unwrap()))
            .collect(),
        "AWS::SNS::TopicPolicy" => texts(&stack.resolve(&p["Topics"]).unwrap()),
        "AWS::SNS::Subscription" => vec![resolved(stack, &p["TopicArn"])],
        "AWS::KMS::Alias" => vec![arn("kms", &resolved(stack, &p["AliasName"]))],
        "AWS::Logs::LogGroup" => vec![arn("logs", &format!("log-group:{reference}"))],
        "AWS::CloudWatch::Alarm" => vec![arn("cloudwatch", &format!("alarm:{reference}"))],
        "AWS::Scheduler::Schedule" => {
            vec![arn("scheduler", &format!("schedule/default/{reference}"))]
        }
        "AWS::SES::ConfigurationSet" => vec![arn("ses", &format!("configuration-set/{reference}"))],
        "AWS::SES::ConfigurationSetEventDestination" => vec![arn(
            "ses",
            &format!(
                "configuration-set/{}",
                resolved(stack, &p["ConfigurationSetName"])
            ),
        )],
        "AWS::ApiGatewayV2::Api" => vec![api.clone(), format!("{api}/{}", stack.values["HttpApi"])],
        "AWS::ApiGatewayV2::Stage" => {
            vec![format!("{api}/{}/stages", resolved(stack, &p["ApiId"]))]
        }
        "AWS::WAFv2::LoggingConfiguration" => vec![resolved(stack, &p["ResourceArn"])],
        "AWS::CloudFront::Distribution" => {
            vec![format!(
                "arn:aws:cloudfront::{ACCOUNT}:distribution/{reference}"
            )]
        }
        _ => vec!["*".to_string()],
    }
}

/// The context of the calls on a resource: while creating it, and afterwards.
fn contexts(stack: &Stack, r: &Json) -> [Vec<(String, Vec<String>)>; 2] {
    let p = &r["Properties"];
    match r["Type"].as_str().unwrap() {
        "AWS::IAM::Role" => {
            let boundary = resolved(stack, &p["PermissionsBoundary"]);
            let bounded: Vec<_> = Some(boundary)
                .filter(|b| !b.is_empty())
                .map(|b| ("iam:PermissionsBoundary".to_string(), vec![b]))
                .into_iter()
                .collect();
            [bounded, Vec::new()]
        }
        "AWS::KMS::Key" | "AWS::CloudFront::Distribution" => {
            [tag_context(stack, r, true), tag_context(stack, r, false)]
        }
        "AWS::Lambda::EventSourceMapping" => {
            let function = arn(
                "lambda",
                &format!("function:{}", resolved(stack, &p["FunctionName"])),
            );
            let context = vec![("lambda:FunctionArn".to_string(), vec![function])];
            [context.clone(), context]
        }
        _ => [Vec::new(), Vec::new()],
    }
}

/// Every call CloudFormation makes for one resource of the translated template.
pub fn calls_for(stack: &Stack, artifact_bucket: &str, id: &str, r: &Json) -> Vec<Request> {
    let kind = r["Type"].as_str().unwrap();
    let (_, creating, managing) = HANDLER_CALLS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .unwrap_or_else(|| {
            panic!("{id}: add what CloudFormation calls for {kind} to HANDLER_CALLS")
        });
    let [created, carried] = contexts(stack, r);
    let mut out = Vec::new();
    for target in targets(stack, id, r) {
        for (actions, context) in [(creating, &created), (managing, &carried)] {
            for action in actions.iter() {
                let on = if *action == "kms:CreateKey" {
                    "*"
                } else {
                    target.as_str()
                };
                out.push(with_all(Request::new(action, on), context));
            }
        }
    }
    out.extend(side_calls(stack, artifact_bucket, id, r));
    out
}

/// The calls a resource's handler makes on other resources: roles passed, code read, keys an
/// alias or a secret uses, log deliveries, the service-linked role, the web ACL a distribution
/// names, and the managed policies a role would attach.
fn side_calls(stack: &Stack, artifact_bucket: &str, id: &str, r: &Json) -> Vec<Request> {
    let p = &r["Properties"];
    let passed = |role: &Json, service: &str| {
        Request::new("iam:PassRole", &resolved(stack, role)).with("iam:PassedToService", &[service])
    };
    let deliveries = || {
        [
            "logs:CreateLogDelivery",
            "logs:GetLogDelivery",
            "logs:UpdateLogDelivery",
            "logs:DeleteLogDelivery",
            "logs:ListLogDeliveries",
            "logs:PutResourcePolicy",
            "logs:DescribeResourcePolicies",
            "logs:DescribeLogGroups",
        ]
        .iter()
        .map(|a| Request::new(a, "*"))
        .collect::<Vec<_>>()
    };
    match r["Type"].as_str().unwrap() {
        "AWS::Lambda::Function" => {
            let code = format!(
                "arn:aws:s3:::{artifact_bucket}/{}/code",
                stack.params["AWS::StackName"]
            );
            let mut out = vec![
                Request::new("s3:GetObject", &code),
                passed(&p["Role"], "lambda.amazonaws.com"),
            ];
            if !p["ReservedConcurrentExecutions"].is_null() {
                let function = &stack.values[&format!("{id}.Arn")];
                out.push(Request::new("lambda:PutFunctionConcurrency", function));
            }
            out
        }
        "AWS::Scheduler::Schedule" => {
            vec![passed(&p["Target"]["RoleArn"], "scheduler.amazonaws.com")]
        }
        "AWS::ApplicationAutoScaling::ScalableTarget" => {
            vec![Request::new("iam:CreateServiceLinkedRole", "*").with(
                "iam:AWSServiceName",
                &["dynamodb.application-autoscaling.amazonaws.com"],
            )]
        }
        "AWS::IAM::Role" => {
            let [bounded, _] = contexts(stack, r);
            let managed = stack.resolve(&p["ManagedPolicyArns"]).unwrap_or_default();
            texts(&managed)
                .iter()
                .map(|policy| {
                    with_all(Request::new("iam:AttachRolePolicy", "*"), &bounded)
                        .with("iam:PolicyARN", &[policy])
                })
                .collect()
        }
        "AWS::KMS::Alias" | "AWS::SecretsManager::Secret" => key_side_calls(stack, r),
        "AWS::ApiGatewayV2::Stage" if !p["AccessLogSettings"].is_null() => deliveries(),
        "AWS::WAFv2::LoggingConfiguration" => deliveries(),
        "AWS::CloudFront::Distribution" => {
            vec![Request::new(
                "wafv2:GetWebACL",
                &resolved(stack, &p["DistributionConfig"]["WebACLId"]),
            )]
        }
        _ => Vec::new(),
    }
}

/// The calls on the key an alias names or a secret is sealed under.
fn key_side_calls(stack: &Stack, r: &Json) -> Vec<Request> {
    let p = &r["Properties"];
    match r["Type"].as_str().unwrap() {
        "AWS::KMS::Alias" => {
            let (key, tags) = key_of(stack, &p["TargetKeyId"]);
            let mut out: Vec<Request> = ["kms:CreateAlias", "kms:UpdateAlias", "kms:DeleteAlias"]
                .iter()
                .map(|a| with_all(Request::new(a, &key), &tags))
                .collect();
            out.push(Request::new("kms:ListAliases", "*"));
            out
        }
        _ => {
            let mut out = Vec::new();
            if !p["GenerateSecretString"].is_null() {
                out.push(Request::new("secretsmanager:GetRandomPassword", "*"));
            }
            if !p["KmsKeyId"].is_null() {
                let (key, mut tags) = key_of(stack, &p["KmsKeyId"]);
                tags.push((
                    "kms:ViaService".into(),
                    vec![format!("secretsmanager.{REGION}.amazonaws.com")],
                ));
                for action in ["kms:GenerateDataKey", "kms:Decrypt"] {
                    out.push(with_all(Request::new(action, &key), &tags));
                }
            }
            out
        }
    }
}

/// A key a property names (`Ref` or `GetAtt .Arn`): its ARN and the tags it carries.
pub fn key_of(stack: &Stack, reference: &Json) -> (String, Vec<(String, Vec<String>)>) {
    let named = resolved(stack, reference);
    let logical = named.rsplit("key-").next().unwrap().to_string();
    let key = &translated()["Resources"][&logical];
    assert_eq!(key["Type"], "AWS::KMS::Key", "{named}");
    (
        arn("kms", &format!("key/key-{logical}")),
        tag_context(stack, key, false),
    )
}

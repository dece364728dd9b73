//! schemathesis (PyPI) fuzzes the admin API from its own OpenAPI document:
//! every endpoint, with generated valid and invalid inputs, with and
//! without the token. No answer may be a 5xx.
//!
//! The node's scope admits only `*.test` hosts, which the test config
//! resolves to 127.0.0.1, so whatever seeds the fuzzer invents, nothing
//! is fetched beyond loopback.

use crate::common::Served;
use trawl::actors::Shutdown;
use trawl::admin::Access;
use utoipa::OpenApi as _;

const TOKEN: &str = "fuzz-token";

#[test]
fn the_openapi_document_fuzzed_finds_no_server_error() {
    let python = std::env::var("TRAWL_PYTHON").unwrap_or_else(|_| "python3".into());
    let data = tempfile::tempdir().unwrap();
    let config =
        crate::common::config_with(data.path(), 5, 2, "[scope]\nallow_hosts = [\"*.test\"]\n");
    let (status, stdout, stderr) = actix_rt::System::new().block_on(async move {
        let Served { node, admin, .. } = Served::start(config, Access::with_token(TOKEN, false));
        let base = format!("http://{}", admin.addr);
        let out = actix_web::rt::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .args(["-m", "schemathesis.cli", "run"])
                .arg(format!("{base}/api/v1/openapi.json"))
                .args(["--checks", "not_a_server_error"])
                .args(["--phases", "examples,coverage,fuzzing"])
                .args(["--max-examples", "30"])
                .args(["--workers", "1"])
                .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
                .env("SCHEMATHESIS_HOOKS", "")
                .output()
                .expect("python with schemathesis (scripts/test.sh installs it; set TRAWL_PYTHON)")
        })
        .await
        .unwrap();
        node.send(Shutdown).await.unwrap().unwrap();
        admin.handle.stop(true).await;
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    });
    assert!(
        status.success(),
        "schemathesis found failures:\n{stdout}\n{stderr}"
    );
    // It ran, and tested every operation the document lists.
    let number = |label: &str| -> Option<u32> {
        let line = stdout.lines().find(|l| l.trim_start().starts_with(label))?;
        let value = line.trim_start()[label.len()..].trim();
        value.split('/').next()?.trim().parse().ok()
    };
    let (selected, tested) = (number("Selected:"), number("Tested:"));
    let document = serde_json::to_value(trawl::admin::api::ApiDoc::openapi()).unwrap();
    let operations: Vec<String> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            ["get", "put", "post", "delete"]
                .into_iter()
                .filter(|m| item.get(*m).is_some())
                .map(move |m| format!("{m} {path}"))
        })
        .collect();
    assert!(operations.len() >= 17, "{operations:?}");
    // Schemathesis leaves out the operation serving the document it was
    // given (`GET /api/v1/openapi.json`); it tests every other one.
    assert!(
        tested == Some(operations.len() as u32 - 1) && selected == tested,
        "{operations:?}; {stdout}"
    );
}

/// Every schema the document refers to is in it, and no answer of the API
/// is left untyped (`Object`) but the document itself.
#[test]
fn the_openapi_document_is_closed_and_typed() {
    let document = serde_json::to_value(trawl::admin::api::ApiDoc::openapi()).unwrap();
    let schemas = document["components"]["schemas"].as_object().unwrap();
    let mut refs = Vec::new();
    collect_refs(&document, &mut refs);
    assert!(!refs.is_empty());
    for r in &refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .expect("a schema ref");
        assert!(schemas.contains_key(name), "dangling $ref {r}");
    }
    for (path, item) in document["paths"].as_object().unwrap() {
        if path == "/api/v1/openapi.json" {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            let ok = &op["responses"]["200"]["content"]["application/json"]["schema"];
            assert!(
                ok.get("$ref").is_some(),
                "{method} {path} answers an untyped body: {ok}"
            );
        }
    }
}

fn collect_refs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v.as_str()) {
                    ("$ref", Some(r)) => out.push(r.to_owned()),
                    _ => collect_refs(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

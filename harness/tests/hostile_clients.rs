//! afm-serve against hostile clients: `afm-bench attack`'s short form
//! against afm-serve's front (the bundled model, tight limits so every
//! limit acts within seconds). Each attack gets the answer its limit
//! promises, an honest probe is served during each, and the server keeps
//! serving after.

use std::sync::Arc;
use std::time::Duration;

use afm_engine::api::{serve_on, ApiContext, ConnectionLimits, ServerConfig};
use afm_harness::hostile::attacks::Attack;
use afm_harness::hostile::{self, AttackArgs};
use afm_harness::server::flags::TargetArgs;

async fn serve(api: Arc<ApiContext>, config: ServerConfig) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve_on(listener, api, config, std::future::pending()));
    url
}

fn args(url: &str, only: Vec<Attack>, tag: &str) -> AttackArgs {
    AttackArgs {
        server: TargetArgs {
            url: Some(url.to_string()),
            ..TargetArgs::default()
        },
        only,
        slow_connections: 8,
        idle_connections: 8,
        hold: 8.0,
        burst: 12,
        server_pid: None,
        out: std::env::temp_dir().join(format!("afm-attack-{}-{tag}", std::process::id())),
    }
}

/// The engine with `--refuse-overlong-max-tokens`: the KV hog asks for a
/// million tokens, which is refused then (by default it is cut to what the
/// context holds beside the prompt and admitted within `--max-kv-mb`, as an
/// honest request of that size would be).
fn engine(concurrent: usize) -> Arc<ApiContext> {
    let config = afm_engine::EngineConfig {
        concurrent,
        overlong_max_tokens: afm_engine::runtime::OverlongMaxTokens::Refuse,
        ..Default::default()
    };
    let engine = afm_engine::Engine::start("smollm2", config).expect("run scripts/setup.sh first");
    Arc::new(ApiContext::new(engine, "smollm2"))
}

fn limits(max_connections: usize) -> ServerConfig {
    ServerConfig {
        max_body_bytes: 1 << 20,
        max_queue: 2,
        limits: ConnectionLimits {
            max_connections,
            read_timeout: Some(Duration::from_secs(2)),
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attack_gets_its_limit_s_answer_and_the_probe_is_served() {
    let api = engine(2);
    let url = serve(api.clone(), limits(64)).await;
    let a = args(&url, Vec::new(), "all");
    let report = hostile::run(&a, |_| {}).await.unwrap();
    let _ = std::fs::remove_dir_all(&a.out);
    let table = report.table();
    assert!(report.held(), "{table}");
    let outcomes = |attack: Attack| {
        let r = report.attacks.iter().find(|r| r.attack == attack).unwrap();
        r.answer.outcomes.clone()
    };
    let only = |attack: Attack, label: &str| {
        let o = outcomes(attack);
        assert!(
            o.len() == 1 && o.contains_key(label),
            "{}: {o:?}\n{table}",
            attack.name()
        );
    };
    // The read timeout (2 s) closes slow and silent connections, well
    // before the attack gives up at 8 s.
    for attack in [Attack::Slowloris, Attack::Idle] {
        let r = report.attacks.iter().find(|r| r.attack == attack).unwrap();
        let closed = r
            .answer
            .outcomes
            .keys()
            .all(|k| k.starts_with("closed by the server after"));
        assert!(
            closed && r.answer.seconds < 6.0,
            "{}: {:?}\n{table}",
            attack.name(),
            r.answer
        );
    }
    only(Attack::BigHeaders, "431 (body not JSON)");
    only(Attack::BigBody, "413");
    only(Attack::SlowBody, "408");
    only(Attack::DeepJson, "400");
    only(Attack::KvHog, "400");
    // 2 running + 2 waiting (the probe may hold one of the four): the rest
    // of 12 at once are refused, not queued.
    let burst = outcomes(Attack::Burst);
    assert!(
        burst.keys().all(|k| k == "200" || k == "503")
            && burst.get("503").is_some_and(|&n| n >= 4)
            && burst.get("200").is_some_and(|&n| n >= 2),
        "burst: {burst:?}\n{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_get_a_503_and_the_rest_time_out() {
    let api = engine(2);
    let url = serve(api, limits(4)).await;
    let mut a = args(&url, vec![Attack::Idle], "cap");
    a.idle_connections = 10;
    let report = hostile::run(&a, |_| {}).await.unwrap();
    let _ = std::fs::remove_dir_all(&a.out);
    let o = &report.attacks[0].answer.outcomes;
    // 4 slots (a probe's connection may hold one at that moment): 6 to 8
    // refused.
    let refused = o.get("503").copied().unwrap_or(0);
    assert!((6..=8).contains(&refused), "{o:?}");
    assert_eq!(o.values().sum::<usize>(), 10, "{o:?}");
    assert!(report.attacks[0].answer.clean, "{o:?}");
    // The probe after the attack is served: the cap's slots came back.
    assert!(report.probe_after.all_served(), "{}", report.table());
}

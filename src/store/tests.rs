//! The store's operations, each run against this process's map and a real `redis-server`
//! (started on a free loopback port; `npm test` installs it when missing).

use std::time::Duration;

use super::*;

/// A `redis-server` of this test's own, stopped when dropped.
pub(crate) struct RedisServer {
    child: std::process::Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl RedisServer {
    pub(crate) fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = spawn_redis(port, dir.path());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, port, dir }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) fn store(&self, key: Option<&str>) -> Store {
        let spec = StoreSpec {
            url: Some(self.url()),
            key: key.map(str::to_owned),
            prefix: Some(format!("t{}", crate::hash::random_hex(4))),
        };
        Store::open(&spec).unwrap().unwrap()
    }
}

/// A `redis-server` on loopback `port`, keeping nothing on disk (its folder: `dir`).
fn spawn_redis(port: u16, dir: &std::path::Path) -> std::process::Child {
    std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server runs (Debian: `apt-get install redis-server`; `npm test` installs it)")
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

async fn operations_hold(store: &Store) {
    let k = store.key(&["plain"]);
    assert_eq!(store.get(&k).await.unwrap(), None);
    store.set(&k, b"one", None).await.unwrap();
    assert_eq!(store.get(&k).await.unwrap().unwrap(), b"one");
    assert!(!store.set_if_absent(&k, b"two", None).await.unwrap());
    assert_eq!(store.take(&k).await.unwrap().unwrap(), b"one");
    assert_eq!(store.take(&k).await.unwrap(), None, "taken once");

    let short = store.key(&["short"]);
    store.set(&short, b"x", Some(Duration::from_millis(50))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(store.get(&short).await.unwrap(), None, "expired");

    let versioned = store.key(&["catalog", "a"]);
    assert!(store.put_versioned(&versioned, 10, b"ten").await.unwrap());
    assert!(
        !store.put_versioned(&versioned, 9, b"nine").await.unwrap(),
        "an older write loses"
    );
    assert!(store.put_versioned(&versioned, 11, b"eleven").await.unwrap());
    let missing = store.key(&["catalog", "b"]);
    let read = store.get_versioned(&[versioned.clone(), missing]).await.unwrap();
    assert_eq!(read, vec![Some((11, b"eleven".to_vec())), None]);

    let hash = store.key(&["vectors", "m"]);
    store
        .hash_set(&hash, &[(vec![1], vec![10, 11]), (vec![2], vec![20])])
        .await
        .unwrap();
    let got = store.hash_get(&hash, &[vec![2], vec![3], vec![1]]).await.unwrap();
    assert_eq!(got, vec![Some(vec![20]), None, Some(vec![10, 11])]);

    store
        .hash_set_if_absent(&hash, &[(vec![1], vec![99]), (vec![4], vec![40])])
        .await
        .unwrap();
    let mut all = store.hash_all(&[hash.clone(), store.key(&["none"])]).await.unwrap();
    all[0].sort();
    assert_eq!(
        all,
        vec![
            vec![(vec![1], vec![10, 11]), (vec![2], vec![20]), (vec![4], vec![40])],
            vec![]
        ],
        "set only where absent"
    );

    let lock = store.lock("refresh", Duration::from_secs(5)).await.unwrap().unwrap();
    assert!(
        store.lock("refresh", Duration::from_secs(5)).await.unwrap().is_none(),
        "held"
    );
    lock.release().await.unwrap();
    assert!(
        store.lock("refresh", Duration::from_secs(5)).await.unwrap().is_some(),
        "released"
    );

    let bucket = store.key(&["bucket", "alice"]);
    assert_eq!(store.take_token(&bucket, 10.0, 2).await.unwrap(), None);
    assert_eq!(store.take_token(&bucket, 10.0, 2).await.unwrap(), None);
    let wait = store.take_token(&bucket, 10.0, 2).await.unwrap().expect("burst spent");
    assert!(wait <= Duration::from_millis(100) && wait > Duration::ZERO, "{wait:?}");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(store.take_token(&bucket, 10.0, 2).await.unwrap(), None, "refilled");

    let mut messages = store.subscribe(&store.key(&["changes"]));
    assert_eq!(messages.recv().await, Some(Delivery::Connected));
    store.publish(&store.key(&["changes"]), b"hello").await.unwrap();
    assert_eq!(messages.recv().await, Some(Delivery::Message(b"hello".to_vec())));
}

#[tokio::test]
async fn the_process_map_does_what_redis_does() {
    operations_hold(&Store::memory()).await;
}

#[tokio::test]
async fn redis_does_every_operation() {
    let redis = RedisServer::start();
    let store = redis.store(None);
    operations_hold(&store).await;
    assert!(store.health().reached && store.health().up);
}

#[tokio::test]
async fn secrets_are_sealed_in_redis_and_refused_without_a_key() {
    let redis = RedisServer::start();
    let store = redis.store(Some(KEY));
    let key = store.key(&["token", "alice"]);
    store.set_sealed(&key, b"alice-token", None).await.unwrap();
    let raw = store.get(&key).await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&raw).contains("alice-token"), "sealed at rest");
    assert_eq!(store.get_sealed(&key).await.unwrap().unwrap(), b"alice-token");
    // Copied under another user's key, it does not open.
    let bob = store.key(&["token", "bob"]);
    store.set(&bob, &raw, None).await.unwrap();
    assert_eq!(store.get_sealed(&bob).await.unwrap(), None);
    assert_eq!(store.take_sealed(&key).await.unwrap().unwrap(), b"alice-token");

    let keyless = redis.store(None);
    let error = keyless.set_sealed(&keyless.key(&["t"]), b"x", None).await.unwrap_err();
    assert!(matches!(error, StoreError::NoKey), "{error}");
}

#[tokio::test]
async fn a_store_that_stops_answering_fails_fast_and_says_why_then_recovers() {
    let mut redis = RedisServer::start();
    let store = redis.store(None);
    let key = store.key(&["k"]);
    store.set(&key, b"v", None).await.unwrap();
    let _ = redis.child.kill();
    let _ = redis.child.wait();
    let started = std::time::Instant::now();
    let error = store.get(&key).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    assert!(matches!(error, StoreError::Unavailable { .. }), "{error}");
    let health = store.health();
    assert!(!health.up && health.reached && health.reason.is_some(), "{health:?}");
    // The same port again: the driver reconnects by itself.
    redis.child = spawn_redis(redis.port, redis.dir.path());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        if store.set(&key, b"again", None).await.is_ok() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no reconnect: {:?}",
            store.health()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(store.health().up);
}

#[test]
fn a_url_password_is_a_secret_and_bad_urls_name_the_fix() {
    let spec = StoreSpec {
        url: Some("redis://:hunter2-store-pass@127.0.0.1:1".to_owned()),
        key: None,
        prefix: None,
    };
    let store = Store::open(&spec).unwrap().unwrap();
    assert!(!store.health().at.contains("hunter2"), "{}", store.health().at);
    assert!(!crate::secrets::scrub("pass hunter2-store-pass").contains("hunter2"));
    let bad = StoreSpec {
        url: Some("http://x".to_owned()),
        ..StoreSpec::default()
    };
    assert!(Store::open(&bad).unwrap_err().to_string().contains("redis://"));
    let short_key = StoreSpec {
        url: Some("redis://127.0.0.1:1".to_owned()),
        key: Some("c2hvcnQ=".to_owned()),
        prefix: None,
    };
    let error = Store::open(&short_key).unwrap_err().to_string();
    assert!(error.starts_with("discovery.store.key is 5 bytes"), "{error}");
}

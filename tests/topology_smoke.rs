//! Sanity checks of the multi-node harness (`common::topology`): the shared cluster forms
//! and routes keys, and a Sentinel set fails over.

mod common;

use std::time::{Duration, Instant};

use common::topology::{self, SentinelSet};

#[test]
fn cluster_forms_and_routes_keys() {
    let begun = Instant::now();
    let cluster = topology::shared_cluster();
    println!(
        "cluster: started in {:?} (ready for this test after {:?})",
        cluster.startup_time(),
        begun.elapsed()
    );
    assert_eq!(cluster.seeds().len(), 6);

    let map = cluster.slot_map();
    assert_eq!(map.len(), 3, "{map:?}");
    assert_eq!(map.first().map(|r| r.start), Some(0), "{map:?}");
    assert_eq!(
        map.last().map(|r| r.end),
        Some(topology::SLOTS - 1),
        "{map:?}"
    );
    for pair in map.windows(2) {
        assert_eq!(pair[0].end + 1, pair[1].start, "{map:?}");
    }
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3, "{map:?}");
    for &primary in &primaries {
        let replicas = cluster.replicas_of(primary);
        assert_eq!(replicas.len(), 1, "{map:?}");
        assert!(!primaries.contains(&replicas[0]), "{map:?}");
    }

    // slot_of agrees with CLUSTER KEYSLOT, hash tags included.
    assert_eq!(topology::slot_of("123456789"), 0x31C3);
    let mut conn = cluster.node_conn(primaries[0]);
    let keys = [
        "",
        "a",
        "foo",
        "123456789",
        "redis-locks:orders",
        "redis-locks:{orders}:lock",
        "{user1000}.following",
        "{user1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "{}",
        "}{",
        "{a",
        "a}",
        "{{}}",
        "ключ{замок}",
        "🔒",
    ];
    for key in keys {
        let expected: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .unwrap();
        assert_eq!(topology::slot_of(key), expected, "key {key:?}");
        assert_eq!(cluster.slot_of(key), expected, "key {key:?}");
    }
    for i in 0..200 {
        let key = format!("key:{i}:{{tag{}}}", i % 7);
        let expected: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&key)
            .query(&mut conn)
            .unwrap();
        assert_eq!(topology::slot_of(&key), expected, "key {key:?}");
    }

    // SET/GET through the node that serves the key; another primary redirects.
    let key = format!("topology-smoke:{}", std::process::id());
    let owner = cluster.primary_for_key(&key);
    let mut conn = cluster.node_conn(owner);
    let () = redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .arg("PX")
        .arg(60_000)
        .query(&mut conn)
        .unwrap();
    let value: String = redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
    assert_eq!(value, "v");
    let other = *primaries.iter().find(|&&p| p != owner).unwrap();
    let err = redis::cmd("GET")
        .arg(&key)
        .query::<Option<String>>(&mut cluster.node_conn(other))
        .unwrap_err();
    assert_eq!(err.code(), Some("MOVED"), "{err}");
    let () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
    assert!(cluster.redis_cli(owner, &["PING"]).contains("PONG"));
}

#[test]
fn sentinel_failover_promotes_the_replica() {
    let set = SentinelSet::start();
    println!("sentinel set: started in {:?}", set.startup_time());
    assert_eq!(set.service(), "mymaster");
    let ports = set.sentinel_ports();
    assert_eq!(
        set.url(),
        format!(
            "redis-sentinel://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}/0#mymaster",
            ports[0], ports[1], ports[2]
        )
    );
    let (primary, replica) = (set.data_ports()[0], set.data_ports()[1]);
    assert_eq!(set.current_primary(), primary);

    set.kill(primary);
    assert!(!set.is_alive(primary));
    let failover = set.wait_for_failover(primary, Duration::from_secs(15));
    println!("sentinel failover: {:?}", failover.elapsed);
    assert_eq!(failover.new_primary, replica);
    assert_eq!(set.current_primary(), replica);
}

//! A throw-away certificate authority for the TLS tests (`tests/security.rs`,
//! `tests/topology_security.rs`), made with the `openssl` command-line tool: a CA, a
//! server certificate for `localhost` / `127.0.0.1` and a client certificate for mutual
//! TLS.
//!
//! The server certificate may also be presented by a node acting as a TLS client
//! (replication, the cluster bus, a sentinel's links), so it carries both `serverAuth`
//! and `clientAuth`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The files `ca.crt`, `server.crt`, `server.key`, `client.crt`, `client.key` in a
/// temporary directory (removed when dropped).
pub struct Certs {
    pub dir: tempfile::TempDir,
}

impl Certs {
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_owned()
    }

    pub fn path_buf(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.dir.path().join(name)).unwrap()
    }

    /// The test CA as the only root, no client certificate.
    #[cfg(feature = "tls")]
    pub fn ca_only(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(self.read("ca.crt")),
        }
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect(
            "the TLS tests need the `openssl` command-line tool \
             (Debian: apt-get install -y openssl)",
        );
    assert!(
        output.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

pub fn make_certs() -> Certs {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    std::fs::write(d.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    let days = "2";
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            days,
            "-subj",
            "/CN=redis-locks test CA",
        ],
    );
    for (name, cn) in [("server", "localhost"), ("client", "redis-locks client")] {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        let crt = format!("{name}.crt");
        let ext = format!("{name}.ext");
        let subj = format!("/CN={cn}");
        openssl(
            d,
            &[
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj",
                &subj,
            ],
        );
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                days,
                "-extfile",
                &ext,
            ],
        );
    }
    Certs { dir }
}

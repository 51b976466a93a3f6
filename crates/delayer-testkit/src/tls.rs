//! Certificates for a TLS redis-server, made with the openssl command line as Redis's own
//! `gen-test-certs.sh` makes them: a CA, a certificate for the server (127.0.0.1 and localhost),
//! one for a client (mutual TLS), and a second CA that signed none of them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The files, in one directory.
pub struct Certificates {
    dir: PathBuf,
}

impl Certificates {
    /// Makes them all in `dir` (created).
    pub fn make(dir: &Path) -> Certificates {
        std::fs::create_dir_all(dir).unwrap();
        let certificates = Certificates {
            dir: dir.to_path_buf(),
        };
        // EC keys: quick to make. SANs: rustls checks them, not the common name.
        for ca in ["ca", "other-ca"] {
            certificates.openssl(&format!(
                "req -x509 -new -nodes -days 2 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
                 -subj /CN=delayer-test-{ca} -keyout {ca}.key -out {ca}.crt"
            ));
        }
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName = DNS:localhost, IP:127.0.0.1\n",
        )
        .unwrap();
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage = clientAuth\n").unwrap();
        for (name, common_name) in [("server", "localhost"), ("client", "delayer")] {
            certificates.openssl(&format!(
                "req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
                 -subj /CN={common_name} -keyout {name}.key -out {name}.csr"
            ));
            certificates.openssl(&format!(
                "x509 -req -days 2 -in {name}.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
                 -extfile {name}.ext -out {name}.crt"
            ));
        }
        certificates
    }

    /// A file of the set: `ca.crt`, `other-ca.crt`, `server.crt`, `server.key`, `client.crt`,
    /// `client.key`.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Runs `openssl` with `command`'s words (none has a space) in the directory.
    fn openssl(&self, command: &str) {
        let output = Command::new("openssl")
            .args(command.split_whitespace())
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run openssl ({error}): install it (e.g. `apt-get install openssl`) or \
                     run the tests with scripts/test, which does"
                )
            });
        assert!(
            output.status.success(),
            "openssl {command}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

//! The TLS files of `[redis]`, read and checked before any connection: a file that cannot be read,
//! holds no PEM, or a certificate and key that do not belong together are told at start, by name.

use std::path::Path;
use std::sync::Once;

use anyhow::{Context, Result, bail};
use deadpool_redis::redis::{ClientTlsConfig, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsSettings;

/// The CA and client certificate of `tls`, read, each file named when it cannot be read or holds
/// no usable PEM.
pub(super) fn certificates(tls: &TlsSettings) -> Result<TlsCertificates> {
    static CRYPTO: Once = Once::new();
    // rustls wants its cryptography chosen once per process: ring, the one compiled in.
    CRYPTO.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let root_cert = match &tls.ca_file {
        Some(path) => Some(pem_file(path, "tls_ca_file", Pem::Certificates)?),
        None => None,
    };
    let client_tls = match tls.client() {
        Some((cert, key)) => {
            let client_cert = pem_file(cert, "tls_cert_file", Pem::Certificates)?;
            let client_key = pem_file(key, "tls_key_file", Pem::PrivateKey)?;
            check_pair(&client_cert, &client_key).with_context(|| {
                format!(
                    "[redis] tls_cert_file {} and tls_key_file {} do not belong together",
                    cert.display(),
                    key.display()
                )
            })?;
            Some(ClientTlsConfig {
                client_cert,
                client_key,
            })
        }
        None => None,
    };
    Ok(TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// Fails unless `key` is the private key of the first certificate in `cert` (both PEM, parsed
/// already): rustls would otherwise refuse them at every connection, as if Redis were down.
fn check_pair(cert: &[u8], key: &[u8]) -> Result<()> {
    let chain = CertificateDer::pem_slice_iter(cert).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(key)?;
    rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, key)?;
    Ok(())
}

/// What a PEM file of `[redis]` must hold.
enum Pem {
    Certificates,
    PrivateKey,
}

/// The file at `path` (`[redis] key`), read and checked to hold what `holds` says.
fn pem_file(path: &Path, key: &str, holds: Pem) -> Result<Vec<u8>> {
    let named = || format!("[redis] {key} {}", path.display());
    let pem = std::fs::read(path).with_context(|| format!("cannot read {}", named()))?;
    let usable = match holds {
        Pem::Certificates => CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map(|certificates| !certificates.is_empty()),
        Pem::PrivateKey => PrivateKeyDer::from_pem_slice(&pem).map(|_| true),
    };
    let wanted = match holds {
        Pem::Certificates => "PEM certificate (-----BEGIN CERTIFICATE-----)",
        Pem::PrivateKey => "PEM private key (-----BEGIN PRIVATE KEY-----)",
    };
    match usable {
        Ok(true) => Ok(pem),
        Ok(false) => bail!("{} holds no {wanted}", named()),
        Err(error) => bail!("{} does not hold a usable {wanted}: {error}", named()),
    }
}

//! The `[qstash]` keys: QStash's API (its token, the destinations it may reach), and the signing
//! keys that webhook and QStash deliveries carry QStash's signature by.

use super::super::values::assign;
use super::Key;
use crate::qstash::SigningKeys;

/// The section's keys, in the order the printout and `dist/delayer.conf` list them.
pub(super) const KEYS: &[Key] = &[
    Key {
        section: "qstash",
        name: "token",
        default: "",
        doc: "serves QStash's API (/v2/...) on [http] listen to Authorization: Bearer <token>; empty: not served",
        secret: true,
        set: |config, raw| assign(&mut config.qstash.token, Ok(Some(raw.to_string()))),
        show: |config| config.qstash.token.clone(),
    },
    Key {
        section: "qstash",
        name: "allow",
        default: "",
        doc: "destinations the API may publish to although refused by default (loopback, link-local, this daemon): host names, addresses or ranges, comma-separated",
        secret: false,
        set: |config, raw| {
            let allow = raw
                .split(',')
                .map(crate::qstash::Allowed::parse)
                .collect::<Result<Vec<_>, _>>();
            assign(&mut config.qstash.allow, allow)
        },
        show: |config| {
            let allow = &config.qstash.allow;
            (!allow.is_empty()).then(|| {
                let shown: Vec<String> = allow.iter().map(ToString::to_string).collect();
                shown.join(", ")
            })
        },
    },
    Key {
        section: "qstash",
        name: "current_signing_key",
        default: "",
        doc: "signs each webhook and QStash delivery (Upstash-Signature, QStash's JWT); empty: not signed",
        secret: true,
        set: |config, raw| {
            assign(
                &mut config.qstash.keys,
                Ok(Some(SigningKeys {
                    current: raw.to_string(),
                    next: None,
                })),
            )
        },
        show: |config| Some(config.qstash.keys.as_ref()?.current.clone()),
    },
    Key {
        section: "qstash",
        name: "next_signing_key",
        default: "",
        doc: "the key that signs once the current one is retired; receivers accept both",
        secret: true,
        set: |config, raw| match &mut config.qstash.keys {
            Some(keys) => assign(&mut keys.next, Ok(Some(raw.to_string()))),
            // The rules say that the current key is missing.
            None => Ok(()),
        },
        show: |config| config.qstash.keys.as_ref()?.next.clone(),
    },
];

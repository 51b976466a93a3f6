//! The `[qstash]` keys: the signing keys that webhook requests carry QStash's signature by.

use super::super::values::assign;
use super::Key;
use crate::webhook::SigningKeys;

/// The section's keys, in the order the printout and `dist/delayer.conf` list them.
pub(super) const KEYS: &[Key] = &[
    Key {
        section: "qstash",
        name: "current_signing_key",
        default: "",
        doc: "signs each webhook request (Upstash-Signature, QStash's JWT); empty: requests are not signed",
        secret: true,
        set: |config, raw| {
            assign(
                &mut config.signing_keys,
                Ok(Some(SigningKeys {
                    current: raw.to_string(),
                    next: None,
                })),
            )
        },
        show: |config| Some(config.signing_keys.as_ref()?.current.clone()),
    },
    Key {
        section: "qstash",
        name: "next_signing_key",
        default: "",
        doc: "the key that signs once the current one is retired; receivers accept both",
        secret: true,
        set: |config, raw| match &mut config.signing_keys {
            Some(keys) => assign(&mut keys.next, Ok(Some(raw.to_string()))),
            // The rules say that the current key is missing.
            None => Ok(()),
        },
        show: |config| config.signing_keys.as_ref()?.next.clone(),
    },
];

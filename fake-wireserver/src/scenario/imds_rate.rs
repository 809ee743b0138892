//! `[imds] rate_limit`: IMDS's own per-VM request limit, which the platform documents as 5
//! requests per second with a 429 beyond (docs/protocol.md §1.2). On by default, so an agent
//! that hammers IMDS meets what it would meet on Azure; a scenario may switch it off
//! (`rate_limit = false`) or set another number of requests per second (`rate_limit = 20`).
//! `true` is the platform's figure.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::MAX_RATE_REQUESTS;

/// The platform's IMDS limit: requests per second per VM (docs/protocol.md §1.2).
pub const IMDS_REQUESTS_PER_SECOND: u32 = 5;

/// IMDS's per-VM limit as a scenario sets it. A fake serves one VM, so the limit counts every
/// IMDS request the fake receives, whichever client address sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImdsRateLimit {
    /// `rate_limit = false`: every IMDS request is answered.
    Off,
    /// At most this many IMDS requests in any second (sliding); the rest get the 429.
    PerSecond(u32),
}

impl Default for ImdsRateLimit {
    /// The platform's: [`IMDS_REQUESTS_PER_SECOND`].
    fn default() -> Self {
        ImdsRateLimit::PerSecond(IMDS_REQUESTS_PER_SECOND)
    }
}

impl ImdsRateLimit {
    /// Requests allowed per second, `None` when off.
    pub fn per_second(self) -> Option<u32> {
        match self {
            ImdsRateLimit::Off => None,
            ImdsRateLimit::PerSecond(n) => Some(n),
        }
    }

    /// The rule a number given in a scenario obeys (the parser and [`super::Scenario::validate`]).
    pub(super) fn check(self) -> Result<(), String> {
        match self {
            ImdsRateLimit::PerSecond(n) if !(1..=MAX_RATE_REQUESTS).contains(&n) => {
                Err(expected(&n.to_string()))
            }
            _ => Ok(()),
        }
    }
}

fn expected(got: &str) -> String {
    format!(
        "must be false (no limit), true (the platform's {IMDS_REQUESTS_PER_SECOND} per second) or requests per second 1-{MAX_RATE_REQUESTS}, got {got}"
    )
}

impl Serialize for ImdsRateLimit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ImdsRateLimit::Off => s.serialize_bool(false),
            ImdsRateLimit::PerSecond(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for ImdsRateLimit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RateVisitor)
    }
}

struct RateVisitor;

impl Visitor<'_> for RateVisitor {
    type Value = ImdsRateLimit;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("false, true or a number of requests per second")
    }

    fn visit_bool<E: de::Error>(self, on: bool) -> Result<Self::Value, E> {
        Ok(if on {
            ImdsRateLimit::default()
        } else {
            ImdsRateLimit::Off
        })
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        let limit = u32::try_from(n)
            .map(ImdsRateLimit::PerSecond)
            .map_err(|_| E::custom(expected(&n.to_string())))?;
        limit.check().map_err(E::custom)?;
        Ok(limit)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
        self.visit_i64(i64::try_from(n).unwrap_or(i64::MAX))
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Self::Value, E> {
        Err(E::custom(expected(&x.to_string())))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Err(E::custom(expected(&format!("{s:?}"))))
    }
}

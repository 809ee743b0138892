//! Provisioning health reporter (work in progress).

//! The instance-type and price refresh (upstream karpenter-provider-aws v1.14.1
//! `pkg/controllers/providers/instancetype` and `pkg/controllers/providers/pricing`, each every
//! 12 hours): the provider describes the region's types, zone offerings and prices, core builds
//! the catalogue from them ([`carpentry_core::Catalogue::live`]), and every later decision uses it.
//! Until the first answer, and whenever the types cannot be described, the last catalogue stands
//! (at first the embedded one); a failed refresh is tried again after upstream's backoff
//! ([`refresh::refresh_retry_millis`]: 1 ms doubling to 1000 s; a pass comes at most every
//! second).

use std::sync::Arc;
use std::time::{Duration, Instant};

use carpentry_core::providers::refresh;
use carpentry_core::Catalogue;
use tracing::{info, warn};

use super::{concern_common, Common, Concern};
use crate::cloud::CloudProvider;

/// Upstream's cadence for both refreshes (core's).
const REFRESH: Duration = Duration::from_secs(refresh::INSTANCE_TYPES_REFRESH_SECONDS);

#[derive(Default)]
pub(super) struct State {
    /// When to ask again; `None` before the first time.
    next: Option<Instant>,
    /// The provider has nothing to refresh (kwok).
    never: bool,
    /// The wait after the last failed refresh (milliseconds; `None` after a success).
    backoff: Option<u64>,
}

/// The concern: the catalogue refreshed on upstream's cadence, published to every other concern.
pub(super) struct Catalogues<P: CloudProvider> {
    common: Common<P>,
    instancetype: State,
}
concern_common!(Catalogues);

impl<P: CloudProvider> Catalogues<P> {
    pub(super) fn new(common: Common<P>) -> Self {
        Catalogues { common, instancetype: State::default() }
    }
}

impl<P: CloudProvider> Concern<P> for Catalogues<P> {
    const NAME: &'static str = "instancetype";

    async fn pass(&mut self, _: std::sync::Arc<super::Loaded>, _: i64) {
        self.refresh_catalogue().await;
    }
}

impl<P: CloudProvider> Catalogues<P> {
    async fn refresh_catalogue(&mut self) {
        let state = &self.instancetype;
        if state.never || state.next.is_some_and(|at| Instant::now() < at) {
            return;
        }
        let refreshed = self.cloud.refresh_catalogue(Catalogue::embedded()).await;
        match refreshed {
            None => self.instancetype.never = true,
            Some(Ok(catalogue)) => {
                let types = catalogue.instance_type_count();
                let zones = catalogue.zones(&self.region).map_or(0, <[_]>::len);
                info!(region = %self.region, types, zones, prices = ?catalogue.provenance().notes.last(),
                    "instance types, offerings and prices refreshed from the cloud");
                let catalogue = Arc::new(catalogue);
                *self.shared.catalogue.write().unwrap_or_else(std::sync::PoisonError::into_inner) = catalogue.clone();
                self.catalogue = catalogue;
                self.instancetype.next = Some(Instant::now() + REFRESH);
                self.instancetype.backoff = None;
            }
            Some(Err(e)) => {
                let backoff = refresh::refresh_retry_millis(self.instancetype.backoff);
                warn!(error = %format!("{e:#}"), retry_millis = backoff,
                    "instance types not refreshed from the cloud; the last catalogue stands");
                self.instancetype.backoff = Some(backoff);
                self.instancetype.next = Some(Instant::now() + Duration::from_millis(backoff));
            }
        }
        // After the catalogue is written: a pass that sees the flag has the refreshed catalogue.
        self.shared.catalogue_settled.store(true, std::sync::atomic::Ordering::Release);
    }
}

//! Disruption (upstream `pkg/controllers/disruption`, `pkg/utils/pdb`, `pkg/utils/disruption`;
//! reference §2.5–§3): what may be evicted and when. The simulation's termination flow uses
//! these today; candidate selection, budgets and consolidation build on them.

pub mod do_not_disrupt;
pub mod pdb;

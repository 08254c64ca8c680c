//! `base`: base pages only. The baseline every superpage policy is measured against.

use super::{FaultDecision, FaultInfo, Features, Params, Policy};
use crate::error::Result;
use crate::units::PageSize;

pub struct Base;

pub fn build(params: &Params, _sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    let crate::spec::NoParams {} = crate::spec::from_params("policy", "base", params)?;
    Ok(Box::new(Base))
}

impl Policy for Base {
    fn name(&self) -> String {
        "base".into()
    }
    fn on_fault(&mut self, _f: &FaultInfo) -> FaultDecision {
        FaultDecision::base()
    }
    fn features(&self) -> Features {
        Features { only_size: Some(0), ..Features::default() }
    }
}

//! `fixed:SIZE`: Romer et al.'s FIXED policy (ISCA 1995, section 5): every region is mapped with
//! pages of one size from the start, so there is no promotion at all. By default, as in their
//! trace-driven model, the aligned page may reach past the VMA (the extra memory shows up as
//! memory overhead); `fit=vma` falls back to the largest smaller size that fits instead.

use super::{check_params, FaultDecision, FaultInfo, Params, Policy};
use crate::error::{Error, Result};
use crate::units::PageSize;

pub struct Fixed {
    size: PageSize,
    size_idx: u32,
    fit_vma: bool,
}

pub fn build(params: &Params, sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    check_params("fixed", params, &["_", "size", "fit"])?;
    let s = params.get("size").or_else(|| params.get("_")).ok_or_else(|| Error::usage("policy fixed needs a page size: fixed:SIZE (e.g. fixed:2MiB)"))?;
    let size = PageSize::parse(s).map_err(|m| Error::usage(format!("policy fixed: {m}")))?;
    let size_idx = sizes.iter().position(|&p| p == size).ok_or_else(|| {
        let have: Vec<String> = sizes.iter().map(|p| p.to_string()).collect();
        Error::usage(format!("policy fixed: this machine has no {size} pages (it has {})", have.join(", ")))
    })? as u32;
    let fit_vma = match params.get("fit").map(String::as_str) {
        None | Some("none") => false,
        Some("vma") => true,
        Some(o) => return Err(Error::usage(format!("policy fixed: fit={o}: expected fit=vma or fit=none"))),
    };
    Ok(Box::new(Fixed { size, size_idx, fit_vma }))
}

impl Policy for Fixed {
    fn name(&self) -> String {
        format!("fixed:{}", self.size)
    }
    fn on_fault(&mut self, _f: &FaultInfo) -> FaultDecision {
        FaultDecision::size(self.size_idx, self.fit_vma)
    }
}

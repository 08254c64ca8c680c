//! `fixed:SIZE`: Romer et al.'s FIXED policy (ISCA 1995, section 5): every region is mapped with
//! pages of one size from the start, so there is no promotion at all. By default, as in their
//! trace-driven model, the aligned page may reach past the VMA (the extra memory shows up as
//! memory overhead); `fit=vma` falls back to the largest smaller size that fits instead.

use super::{FaultDecision, FaultInfo, Params, Policy};
use crate::error::{Error, Result};
use crate::units::PageSize;

pub struct Fixed {
    size: PageSize,
    size_idx: u32,
    fit_vma: bool,
}

/// fixed's parameters: the page size (`fixed:SIZE` or `size=`) and `fit`.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct FixedParams {
    #[serde(rename = "_")]
    bare: Option<String>,
    size: Option<String>,
    fit: Fit,
}

/// Where the aligned page may reach: past the VMA (`none`, the paper's model) or only within
/// it (`vma`).
#[derive(serde::Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Fit {
    #[default]
    None,
    Vma,
}

pub fn build(params: &Params, sizes: &[PageSize]) -> Result<Box<dyn Policy>> {
    let p: FixedParams = crate::spec::from_params("policy", "fixed", params)?;
    let s = p.size.or(p.bare).ok_or_else(|| Error::usage("policy fixed needs a page size: fixed:SIZE (e.g. fixed:2MiB)"))?;
    let size = PageSize::parse(&s).map_err(|m| Error::usage(format!("policy fixed: {m}")))?;
    let size_idx = sizes.iter().position(|&p| p == size).ok_or_else(|| {
        let have: Vec<String> = sizes.iter().map(|p| p.to_string()).collect();
        Error::usage(format!("policy fixed: this machine has no {size} pages (it has {})", have.join(", ")))
    })? as u32;
    let fit_vma = p.fit == Fit::Vma;
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

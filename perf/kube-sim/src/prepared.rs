//! Updates and patches computed outside the state lock: the HTTP server's PUT and PATCH of the
//! kinds written often (pods and ResourceClaims, those whose current version keeps its parse,
//! `store::keeps_parse`). Each reads the object's current version under the lock, computes the
//! new one without it ([`store::next_version`]: precondition, validation, admission,
//! `managedFields`, which are most of a write's cost), and takes the lock again to write it if
//! the version is still current, a compare-and-swap on the version. A write in between makes it
//! compute again under the lock, as every write did before, so the outcome is the one of a
//! write made entirely under the lock at that moment: the same checks against the same version.

use crate::error::ApiError;
use crate::inner::Inner;
use crate::managed::Manager;
use crate::patch::PatchKind;
use crate::resources::ResourceDef;
use crate::store::{self, Part, Stored, keeps_parse};
use serde_json::Value;
use std::sync::Arc;

impl Inner {
    /// The current version of `def`'s object `ns/name` and its parse (parsed without the lock
    /// unless kept), with the admission plugins that run.
    fn current(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
    ) -> Result<(Arc<Stored>, Arc<Value>, crate::admission::Admission), ApiError> {
        let st = self.state();
        let cur = st.get(def, ns, name)?;
        let admission = st.admission();
        let kept = st.parsed_of(def, &cur);
        drop(st);
        let parsed = kept.unwrap_or_else(|| Arc::new(cur.value()));
        Ok((cur, parsed, admission))
    }

    /// PUT of `def`'s object `ns/name` (or its `part`) by `manager`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut obj: Value,
        part: Part,
        manager: &Manager,
    ) -> Result<Arc<Stored>, ApiError> {
        if !keeps_parse(def) {
            return self
                .state()
                .update_by(def, ns, name, obj, part, Some(manager), None);
        }
        store::check_update_request(def, ns, name, &mut obj)?;
        let (cur, parsed, admission) = self.current(def, ns, name)?;
        let next = store::next_version(
            def,
            &parsed,
            obj.clone(),
            name,
            part,
            Some(manager),
            None,
            admission,
            None,
        );
        let mut st = self.state();
        if st
            .get(def, ns, name)
            .is_ok_and(|now| Arc::ptr_eq(&now, &cur))
        {
            st.remember(def, &cur, parsed.clone());
            return st.write_next(def, name, part, cur, &parsed, next?);
        }
        st.update_by(def, ns, name, obj, part, Some(manager), None)
    }

    /// PATCH of `def`'s object `ns/name` (or its `part`) by `manager`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        kind: PatchKind,
        body: &Value,
        part: Part,
        manager: &Manager,
    ) -> Result<Arc<Stored>, ApiError> {
        // A missing object (server-side apply creates it) is the store's to handle.
        let current = keeps_parse(def)
            .then(|| self.current(def, ns, name).ok())
            .flatten();
        let Some((cur, parsed, admission)) = current else {
            return self
                .state()
                .patch_by(def, ns, name, kind, body, part, Some(manager));
        };
        let applied = (kind == PatchKind::Apply).then_some(body);
        let next = store::patched(def, &parsed, kind, body, name).and_then(|mut new| {
            store::check_update_request(def, ns, name, &mut new)?;
            store::next_version(
                def,
                &parsed,
                new,
                name,
                part,
                Some(manager),
                applied,
                admission,
                None,
            )
        });
        let mut st = self.state();
        if st
            .get(def, ns, name)
            .is_ok_and(|now| Arc::ptr_eq(&now, &cur))
        {
            st.remember(def, &cur, parsed.clone());
            return st.write_next(def, name, part, cur, &parsed, next?);
        }
        st.patch_by(def, ns, name, kind, body, part, Some(manager))
    }
}

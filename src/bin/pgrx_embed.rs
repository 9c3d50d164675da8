::pgrx::pgrx_embed!();

//! AODV (RFC 3561) routing daemon: sans-IO protocol core and the aodvd program

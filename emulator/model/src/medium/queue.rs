//! The interface queue between a node's network layer and its MAC:
//! drop-tail, with routing control first when the radio's `queue_priority`
//! is on (ns-2's PriQueue).

use std::collections::VecDeque;

use super::{Dest, Frame};
use crate::config::RadioConfig;

/// A frame in the queue, with the size it has on the air.
#[derive(Debug)]
pub(super) struct Queued<P> {
    pub frame: Frame<P>,
    pub mpdu_bytes: u32,
}

#[derive(Debug)]
pub(super) struct InterfaceQueue<P> {
    frames: VecDeque<Queued<P>>,
}

impl<P> InterfaceQueue<P> {
    pub(super) fn new(radio: &RadioConfig) -> Self {
        InterfaceQueue { frames: VecDeque::with_capacity(radio.queue_len as usize) }
    }

    pub(super) fn len(&self) -> usize {
        self.frames.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    pub(super) fn pop_front(&mut self) -> Option<Queued<P>> {
        self.frames.pop_front()
    }

    /// Takes a frame in. A full queue refuses it (`Err`), unless it is a
    /// priority frame and the queue holds a non-priority one: then the last
    /// frame of the queue makes room (`Ok(Some(pushed out))`, ns-2's
    /// `recvHighPriority`).
    pub(super) fn offer(&mut self, frame: Frame<P>, mpdu_bytes: u32, radio: &RadioConfig) -> Result<Option<Frame<P>>, Frame<P>> {
        let priority = frame.priority() && radio.queue_priority;
        let full = self.frames.len() >= radio.queue_len as usize;
        if full && (!priority || self.frames.iter().all(|q| q.frame.priority())) {
            return Err(frame);
        }
        let queued = Queued { frame, mpdu_bytes };
        if priority {
            // Behind the other priority frames.
            let at = self.frames.iter().position(|q| !q.frame.priority()).unwrap_or(self.frames.len());
            self.frames.insert(at, queued);
        } else {
            self.frames.push_back(queued);
        }
        if !full {
            return Ok(None);
        }
        Ok(Some(self.frames.pop_back().expect("the queue was full").frame))
    }

    /// Takes every frame to `dst` out, in queue order, handing each to `removed`.
    pub(super) fn remove_to(&mut self, dst: Dest, mut removed: impl FnMut(Frame<P>)) {
        let mut kept = VecDeque::with_capacity(self.frames.len());
        for q in self.frames.drain(..) {
            if q.frame.dst == dst {
                removed(q.frame);
            } else {
                kept.push_back(q);
            }
        }
        self.frames = kept;
    }
}

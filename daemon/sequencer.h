#ifndef SSEQ_SEQUENCER_H
#define SSEQ_SEQUENCER_H
#endif

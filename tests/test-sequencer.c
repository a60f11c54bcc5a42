/* placeholder: being written */ typedef int sseq_placeholder_t;

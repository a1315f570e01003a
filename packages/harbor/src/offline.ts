/** What curl, wget, git, pip, Python, npm and Java print when a name cannot be resolved or a host reached. */
export const OFFLINE =
  /Could not resolve host|Temporary failure in name resolution|Name or service not known|Network is unreachable|Failed to establish a new connection|getaddrinfo (?:EAI_AGAIN|ENOTFOUND)|unable to resolve host address|java\.net\.UnknownHostException|ENOTCACHED/;
